"""kube-scheduler's framework in miniature: where the stock scheduler would put a pod, computed
from the nodes and the pods on them, as kube-scheduler v1.36 filters and scores. Pure: no I/O.

Modules, bottom-up (each imports only those before it):
- `model`: nodes, pods (`PodInfo`), what pods take of a node (`NodeUsage`, `UsageTally`), the
  `Profile` (Score plugins and weights, plugin arguments) and the fast-node `Target`;
- `read`: API objects (decoded JSON) into the model;
- `filters`, `scores`: each plugin's Filter check and raw Score, the normalisations, Go's
  integer helpers, the NetQoS plugin's port and the fast nodes a policy prefers;
- `spread`, `podaffinity`: PodTopologySpread and InterPodAffinity, which read every node's pods;
- `plugins`: the ONE table of plugins (name, functions, normaliser, what each reads) and the
  default profile;
- `cycle`: one scheduling cycle over the table (PreFilter, Filter, Score, sampling, the result);
- `keys`: keys that let pods of one template share that work, and the one cap on them;
- `incremental`: what-if placement for pod after pod as usage changes (rebalance), over the
  same table;
- `config`: a KubeSchedulerConfiguration read into a Profile.

explain, status (through `webhook.placement`) and rebalance call these and nothing else to
predict the scheduler.
"""
