module netqos-webhook/benchmarks/loadgen

go 1.22
