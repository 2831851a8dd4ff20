module netqos-webhook/benchmarks/gowebhook

go 1.22
