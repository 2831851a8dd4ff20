"""Test harness for netqos-webhook, importable by the test suite, `scripts/soak` and `benchmarks/`.

Like `kopf.testing` or controller-runtime's `envtest`, it drives the real thing rather than mocks:

- `harness.server`: a real `netqos-webhook serve` (gunicorn, gevent workers, TLS) started
  and stopped within bounded time, clients that connect as the API server does (the Service DNS
  name as SNI and verified name), its workers, JSON log records and metric values;
- `harness.certs`: a CA and server certificate from the project's own generator;
- `harness.procfs`: what the kernel says about a server's processes (workers, RSS, sockets);
- `harness.cpuquota`: a server's processes confined to a CPU quota (a cgroup), as a pod that
  gets only its CPU request on a busy node;
- `harness.patches`: AdmissionReviews for a pod and the cross-check of a JSON patch with
  Go's implementation (`kubectl patch --local`), the one the API server applies;
- `harness.volume`: a directory updated as the kubelet updates a mounted ConfigMap or Secret;
- `harness.kubeapi`: a fake Kubernetes API server on loopback, with cluster builders;
- `harness.gobuild`: the Kubernetes releases the harness builds (the default among them) and the
  build of their binaries from the Go module under harness/go, cached outside the repository;
- `harness.pki`: the control plane's certificate authority, and the certificates and kubeconfigs
  it signs for the components, the admin and each node;
- `harness.controlplane`: a real control plane on loopback from those binaries (etcd,
  kube-apiserver, kube-controller-manager, kube-scheduler with the NetQoS profile), for tests/e2e;
- `harness.nodes`: real nodes for it (kubelets with containerd, kube-proxy; root only);
- `harness.clustercli`: `scripts/cluster` (build, up, down, env, status);
- `harness.pods`: the one builder of Pod manifests, holding exactly the fields asked for;
- `harness.podcreator`: pods created one after another through a real API server, each
  checked for the webhook's preference (rotation, rollout and upgrade tests);
- `harness.clock`: a clock that moves only when a test moves it;
- `harness.waiting`: waiting for an event (a metric, a log line) with a deadline, not a sleep.

No module here imports pytest at import time: scripts use the harness without it.
"""
