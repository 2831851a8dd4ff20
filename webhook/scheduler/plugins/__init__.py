"""kube-scheduler's plugins, one module each as kube-scheduler lays them out
(pkg/scheduler/framework/plugins/<plugin>/): a module holds its plugin's name, reasons, Filter
and PreFilter, PreScore state, Score, normaliser and the variants releases run, and exposes its
table entries (`FILTER`, `SCORE`, and a variant's entry beside them), which `registry` composes.

- `nodeunschedulable`, `nodename`, `tainttoleration`, `nodeaffinity`, `nodeports`: Filter (and
  Score) plugins that read the pod and the node, or what the node's pods take;
- `noderesources`: NodeResourcesFit and NodeResourcesBalancedAllocation;
- `imagelocality`: ImageLocality, with the image state the scheduler's cache keeps;
- `podtopologyspread`, `interpodaffinity`: the plugins that read every node's pods;
- `nodedeclaredfeatures`: NodeDeclaredFeatures, per release;
- `netqos`: the NetQoS scheduler plugin's score table and the fast nodes a policy prefers.
"""
