"""`netqos-webhook status` at Kubernetes' documented limits: time and peak memory.

A fake API server (harness.kubeapi, in a process of its own so its memory is not counted)
holds an installed webhook, N nodes (10 % net=high, 10 % net=low, the rest unlabelled; 8 CPUs and
110 pods allocatable each, so resource fit is evaluated) and P pods, S of them selected by the
policy (qos=latency-sensitive): 80 % carry the terms, 15 % were created before the webhook
(missing, from 100 Deployments), 5 % opted out. The pods on the net=high nodes are read too (one
list per such node), for why selected pods are not on one. Then `netqos-webhook status
-o json` runs as a child process, repeatedly; its wall time, CPU time and peak RSS (getrusage of
that child) are reported per run, with the median and spread. The fake server's own time is inside
the wall time: a real API server answers lists faster.

Two clusters: `shared` (the default), whose selected pods come from 300 templates and 90 % of them
run off the net=high nodes; `diverse`, whose selected pods each come from their own template (own
image, own cpu and memory requests), 95.5 % of them on net=high nodes, so the 4.5 % off them
(1,350 of 30,000: 2 % pending, the rest on other nodes) each need their own "why not on a net=high
node" against nodes the others fill; `statefulsets`, the shared cluster but a quarter of the other
pods (30,000) run in 500 StatefulSets, each pod carrying labels of its own as the StatefulSet
controller sets them (`statefulset.kubernetes.io/pod-name`, `apps.kubernetes.io/pod-index`), the
shape of realscale's world, where a key of the pods' usage that holds their labels never repeats.

    scripts/bench --status-scale                      5,000 nodes, 150,000 pods, 30,000 selected, 3 runs
    scripts/bench --status-scale --cluster diverse    the same sizes, every selected pod its own template
    scripts/bench --status-scale --cluster statefulsets   the shared cluster, a quarter of the others StatefulSets'
    scripts/bench --status-scale --smoke              a few hundred objects: checks the harness
    scripts/bench --status-scale --nodes N --pods P --selected S --repeat R
    scripts/bench --status-scale --baseline DIR       also time the checkout in DIR (git worktree add DIR
                                                      main), alternating runs against the same server
    scripts/bench --status-scale --record             also write the table to docs/evidence/status-scale-DATE.md

Each repeat also measures the floor beside `status`: a plain paginated list of every pod through
the same client and decoder (`benchmarks.readcount --floor`). Each run counts what it read (list
pages, objects in them, bytes of every answer: `benchmarks.readcount`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import evidence, kubeapi
from harness.kubeapi import Snapshot, node, pod, workload

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 30.0
TARGET_RSS_MIB = 400.0
# a run slower than this is reported as failed, not waited for: on a loaded machine runs take minutes
RUN_TIMEOUT = 1800
QOS = {"qos": "latency-sensitive", "app": "web"}
TERMS = [
    {"weight": 90, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}},
    {"weight": 10, "preference": {"matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]}},
]
NS = "netqos-system"
ALLOCATABLE = {"cpu": "8", "memory": "32Gi", "pods": "110"}  # each pod requests 100m / 128Mi: room left


@dataclass(frozen=True)
class Run:
    seconds: float
    cpu_seconds: float  # user + system time of the status process: less sensitive to other load
    max_rss_mib: float
    exit_code: int
    selected: int
    missing: int
    not_on_high: int = 0
    tree: str = "this tree"
    lists: int = 0  # list pages decoded
    objects: int = 0  # objects in those pages
    bytes: int = 0  # bytes of every answer decoded (gets and pages)


def build(nodes: int, pods: int, selected: int, cluster: str = "shared") -> Snapshot:
    """The cluster: the shipped installation, `nodes` nodes and `pods` pods (`selected` selected);
    `cluster` is shared or diverse (see the module's docstring)."""
    import base64

    import yaml

    tls = kubeapi.issue_tls(["netqos-webhook", f"netqos-webhook.{NS}", f"netqos-webhook.{NS}.svc"])
    config = yaml.safe_load((REPO / "deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml").read_text())
    for webhook in config["webhooks"]:
        webhook["clientConfig"]["caBundle"] = base64.b64encode(tls.ca_cert).decode()
    deployment = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    deployment["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"] = "netqos-webhook-policy"
    snapshot = Snapshot().add_all(
        kubeapi.installation(config, deployment, (REPO / "deploy/base/policy.yaml").read_text(), tls, NS)
    )
    names = []
    for i in range(nodes):
        net = "high" if i % 10 == 0 else "low" if i % 10 == 1 else None
        names.append(f"node-{i:05}")
        snapshot.add({**node(names[-1], net), "status": {"allocatable": ALLOCATABLE}})
    namespaces = [f"team-{t:02}" for t in range(50)]
    for ns in namespaces:
        snapshot.add(kubeapi.namespace(ns))
    resources = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    # the pod template of the selected pods' ReplicaSets: what rebalance makes a replacement from
    template = {
        "metadata": {"labels": QOS},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1", "resources": resources}]},
    }
    for d in range(100):  # the Deployments whose pods predate the webhook
        ns = namespaces[d % len(namespaces)]
        snapshot.add(workload("Deployment", ns, f"old-{d:03}"))
        owner = ("Deployment", f"old-{d:03}")
        snapshot.add(workload("ReplicaSet", ns, f"old-{d:03}-5d8f", owner=owner, template=template))
    for w in range(300):  # the ReplicaSets of the pods that carry the terms (pod i: web-{i % 300}, team-{i % 50})
        snapshot.add(workload("ReplicaSet", namespaces[w % len(namespaces)], f"web-{w:03}-7c9d", template=template))
    high = names[::10]
    for i in range(pods):
        ns = namespaces[i % len(namespaces)]
        where = names[(i * 7) % nodes] if i % 50 else None  # 2 % pending
        if cluster == "diverse" and i < selected and where is not None:
            # 750 on nodes other than net=high ones (index 10k + 3), the others on net=high nodes
            where = names[(i * 10 + 3) % nodes] if i % 40 == 1 else high[(i * 7) % len(high)]
        if i < selected:
            kind = i % 20
            if kind < 16:
                extra: dict[str, Any] = {"preferred": TERMS, "owner": ("ReplicaSet", f"web-{i % 300:03}-7c9d")}
            elif kind < 19:
                d = i % 100
                ns = namespaces[d % len(namespaces)]
                extra = {"owner": ("ReplicaSet", f"old-{d:03}-5d8f"), "created": "2025-11-30T12:00:00Z"}
            else:
                extra = {"annotations": {"netqos.io/inject": "false"}}
            p = pod(ns, f"sel-{i:06}", QOS, where, **extra)
        elif cluster == "statefulsets" and i % 4 == 3:
            name, labels = f"pod-{i:06}", {"app": f"db-{i % 500}", "controller-revision-hash": f"db-{i % 500}-5d8f"}
            labels |= {"statefulset.kubernetes.io/pod-name": name, "apps.kubernetes.io/pod-index": str(i // 500)}
            p = pod(ns, name, labels, where, ("StatefulSet", f"db-{i % 500}"))
        else:
            p = pod(ns, f"pod-{i:06}", {"app": f"svc-{i % 500}"}, where, ("ReplicaSet", f"svc-{i % 500}-6b7f"))
        p["spec"]["containers"][0]["resources"] = resources
        if cluster == "diverse" and i < selected:  # its own template: image, environment, requests
            container = p["spec"]["containers"][0]
            container["image"] = f"registry.example/app-{i:06}:1"
            container["env"] = [{"name": "APP", "value": f"app-{i:06}"}]
            container["resources"] = {"requests": {"cpu": f"{50 + i % 97}m", "memory": f"{64 + i % 89}Mi"}}
        snapshot.add(p)
    return snapshot


def _serve(nodes: int, pods: int, selected: int, cluster: str, directory: str, ready: Any) -> None:
    """The fake API server's process: build the snapshot, serve it until terminated."""
    snapshot = build(nodes, pods, selected, cluster)
    with kubeapi.serve(snapshot, Path(directory)) as api:
        ready.send(str(api.kubeconfig))
        while True:
            time.sleep(3600)


def run_child(argv: list[str], tree: Path = REPO) -> tuple[float, float, float, subprocess.CompletedProcess[bytes]]:
    """`argv` as a child process in the checkout `tree`: (wall seconds, CPU seconds, peak RSS in
    MiB, the result). Call it in an interpreter of its own (`--measure`): RUSAGE_CHILDREN is the
    maximum over every reaped child, so there it is this child's alone."""
    import resource

    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, timeout=RUN_TIMEOUT, cwd=tree)  # `-m webhook`: tree's package
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, done  # Linux: KiB


def counted_argv(command: list[str], out: str) -> list[str]:
    """`python -m webhook COMMAND...` with what it reads counted into the file `out`
    (`benchmarks.readcount`, importable from the checkout the child runs in or from this one)."""
    path = f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return ["env", f"PYTHONPATH={path}", sys.executable, "-m", "benchmarks.readcount", out, "--", *command]


def reads(out: str) -> dict[str, int]:
    """What `counted_argv`'s child read: lists, objects, bytes."""
    found = json.loads(Path(out).read_text())
    return {k: found[k] for k in ("lists", "objects", "bytes")}


def checkout_label(tree: Path) -> str:
    """A baseline checkout as the table names it: its directory and the commit it holds, so a
    record says which version it was measured against."""
    found = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"{tree} ({found.stdout.strip()})" if found.returncode == 0 else str(tree)


def measure(kubeconfig: str, tree: Path = REPO) -> Run:
    """One `status -A -o json` of the checkout `tree` in a child process: wall time and peak RSS."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = counted_argv(["status", "-A", "--kubeconfig", kubeconfig, "-o", "json"], out.name)
        seconds, cpu_seconds, rss_mib, done = run_child(argv, tree)
        read = reads(out.name)
    if done.returncode not in (0, 3):
        raise SystemExit(f"status failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    report = json.loads(done.stdout)
    return Run(
        seconds,
        cpu_seconds,
        rss_mib,
        done.returncode,
        report["pods"]["selected"],
        report["pods"]["missing"],
        len(report["not_on_high"]),
        "this tree" if tree == REPO else checkout_label(tree),
        **read,
    )


def measure_floor(kubeconfig: str) -> Run:
    """The floor in a child process: every pod listed, a page at a time, decoded and dropped."""
    argv = [sys.executable, "-m", "benchmarks.readcount", "--floor", kubeconfig]
    seconds, cpu_seconds, rss_mib, done = run_child(argv)
    if done.returncode != 0:
        raise SystemExit(f"the floor failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    read = json.loads(done.stdout)
    return Run(
        seconds, cpu_seconds, rss_mib, 0, 0, 0, tree="floor", **{k: read[k] for k in ("lists", "objects", "bytes")}
    )


@dataclass(frozen=True)
class FakeCluster:
    kubeconfig: str
    pid: int  # the fake API server's process

    def cpu_seconds(self) -> float:
        """User + system time the fake API server has used so far (Linux /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def fake_cluster(nodes: int, pods: int, selected: int, cluster: str = "shared") -> Iterator[FakeCluster]:
    """The fake API server holding `build(...)`, in a process of its own (its memory is not
    counted), until the block ends."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    with tempfile.TemporaryDirectory() as directory:
        built = time.perf_counter()
        server = context.Process(target=_serve, args=(nodes, pods, selected, cluster, directory, send))
        server.start()
        try:
            if not receive.poll(900):
                raise SystemExit("the fake API server did not start within 900 s")
            kubeconfig = receive.recv()
            print(f"fake API server ready in {time.perf_counter() - built:.1f} s", file=sys.stderr)
            assert server.pid is not None
            yield FakeCluster(kubeconfig, server.pid)
        finally:
            server.terminate()
            server.join(30)


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The fake cluster's size and shape, and the output, as both scale benchmarks take them."""
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--selected", type=int, default=30_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--cluster",
        choices=("shared", "diverse", "statefulsets"),
        default="shared",
        help="shared: selected pods from 300 templates; diverse: each selected pod its own template; "
        "statefulsets: shared, a quarter of the other pods in StatefulSets (labels of their own)",
    )
    parser.add_argument("--smoke", action="store_true", help="200 nodes, 2,000 pods, 400 selected, one run")
    parser.add_argument("--json", action="store_true", help="print the runs as JSON instead of a table")


def apply_smoke(args: argparse.Namespace) -> None:
    """--smoke: a few hundred objects and one run, for CI."""
    if args.smoke:
        args.nodes, args.pods, args.selected, args.repeat = 200, 2000, 400, 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench --status-scale", description=__doc__.split("\n\n")[0])
    add_cluster_arguments(parser)
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR", help="a checkout to time too, alternating with this tree"
    )
    parser.add_argument("--measure", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--tree", type=Path, default=REPO, help=argparse.SUPPRESS)
    parser.add_argument("--record", action="store_true", help="also write the table to docs/evidence/")
    args = parser.parse_args(argv)
    if args.measure:  # one run, in its own interpreter: RUSAGE_CHILDREN is then this run's alone
        run = measure_floor(args.measure) if args.tree.name == "floor" else measure(args.measure, args.tree.resolve())
        print(json.dumps(run.__dict__))
        return 0
    apply_smoke(args)
    runs = []
    trees = [Path("floor"), REPO] + ([args.baseline.resolve()] if args.baseline else [])
    load, started = evidence.load_average(), time.perf_counter()
    with fake_cluster(args.nodes, args.pods, args.selected, args.cluster) as fake:
        for _ in range(args.repeat):
            for tree in trees:
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "benchmarks.status_scale",
                        "--measure",
                        fake.kubeconfig,
                        "--tree",
                        str(tree),
                    ],
                    cwd=REPO,
                    capture_output=True,
                    text=True,
                    timeout=RUN_TIMEOUT + 60,
                    check=True,
                )
                runs.append(Run(**json.loads(done.stdout)))
    publish(args, argv, runs, "status-scale", "`status`", report, load, started)
    return 0


def publish(
    args: argparse.Namespace,
    argv: list[str] | None,
    runs: Sequence[Any],
    name: str,
    what: str,
    report: Callable[[int, int, int, str, Any], str],
    load: float,
    started: float,
) -> None:
    """Print the runs (a table, or JSON with --json) and, with --record, write the table to
    docs/evidence/NAME-DATE.md; `what` names the command measured, `report` makes the table."""
    if args.json:
        print(
            json.dumps(
                {"nodes": args.nodes, "pods": args.pods, "cluster": args.cluster, "runs": [r.__dict__ for r in runs]}
            )
        )
    else:
        print(report(args.nodes, args.pods, args.selected, args.cluster, runs))
    if args.record:
        path = evidence.write(
            name,
            f"{what} against the fake API server, {args.nodes:,} nodes and {args.pods:,} pods",
            f"scripts/bench --{name} " + " ".join(argv if argv is not None else sys.argv[1:]),
            report(args.nodes, args.pods, args.selected, args.cluster, runs),
            (load, evidence.load_average()),
            time.perf_counter() - started,
        )
        print(f"recorded in {path.relative_to(REPO)}", file=sys.stderr)


def report(nodes: int, pods: int, selected: int, cluster: str, runs: list[Run]) -> str:
    lines = [
        f"status against {nodes:,} nodes, {pods:,} pods ({selected:,} selected, {cluster} templates), "
        f"{len(runs)} run(s):",
        "",
        "| run | tree | wall time (s) | CPU time (s) | peak RSS (MiB) | lists | objects | MB read "
        "| selected | missing | not on net=high | exit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {i + 1} | {r.tree} | {r.seconds:.1f} | {r.cpu_seconds:.1f} | {r.max_rss_mib:.0f} | {r.lists} "
        f"| {r.objects:,} | {r.bytes / 1e6:.0f} | {r.selected} | {r.missing} | {r.not_on_high} | {r.exit_code} |"
        for i, r in enumerate(runs)
    ]
    lines.append("")
    floor = [r.seconds for r in runs if r.tree == "floor"]
    for tree in dict.fromkeys(r.tree for r in runs):
        mine = [r for r in runs if r.tree == tree]
        seconds, rss = [r.seconds for r in mine], [r.max_rss_mib for r in mine]
        times = f", {statistics.median(seconds) / statistics.median(floor):.2f}x the floor" if floor else ""
        lines.append(
            f"{tree}: median {statistics.median(seconds):.1f} s (min {min(seconds):.1f}, max {max(seconds):.1f}; "
            f"target < {TARGET_SECONDS:.0f} s{times}), CPU median "
            f"{statistics.median(r.cpu_seconds for r in mine):.1f} s, peak RSS median {statistics.median(rss):.0f} "
            f"MiB (max {max(rss):.0f}; target < {TARGET_RSS_MIB:.0f} MiB)"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
