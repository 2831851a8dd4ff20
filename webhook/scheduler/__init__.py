"""kube-scheduler's framework in miniature: where the stock scheduler would put a pod, computed
from the nodes and the pods on them, as kube-scheduler v1.36 filters and scores. Pure: no I/O.

Modules, bottom-up (each imports only those before it):
- `model`: nodes, pods (`PodInfo`), what pods take of a node (`NodeUsage`, `UsageTally`), the
  `Profile` (Score plugins and weights, plugin arguments) and the fast-node `Target`;
- `read`: API objects (decoded JSON) into the model;
- `framework`: what a Filter and a Score plugin are (`FilterPlugin`, `ScorePlugin`, `Reads`),
  NormalizeScore and Go's integer arithmetic;
- `plugins`: one module per plugin, as kube-scheduler's pkg/scheduler/framework/plugins/<plugin>/:
  its reasons, Filter and PreFilter, PreScore state, Score, normaliser and per-release variants
  (the NetQoS plugin's port, and the fast nodes a policy prefers, in `plugins.netqos`);
- `registry`: the ONE table of plugins, built from the plugin modules, the default profile and
  the variants each modelled release runs;
- `cycle`: one scheduling cycle over the table: the ONE filter chain (`FilterChain`: PreFilter,
  node-only, usage and cluster filters), Score, sampling, the result;
- `keys`: keys that let pods of one template share that work, and the one cap on them;
- `incremental`: what-if placement for pod after pod as usage changes (rebalance), over the
  same table;
- `config`: a KubeSchedulerConfiguration read into a Profile.

explain, status (through `webhook.placement`) and rebalance call these and nothing else to
predict the scheduler.
"""
