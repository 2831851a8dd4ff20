"""`scripts/cluster`: build, start, inspect and stop the control plane of `harness.controlplane`
(and its real nodes, `harness.nodes`) from a shell.

`up` never replaces a cluster that is up: run again with what is running (the same release and
number of nodes), it prints the environment of the running one; asked for anything else, it
refuses in one line naming the cluster that is up and how to stop it (exit 2, a usage error), so
namespaces, installations and images loaded into it are never lost to a second `up`. Only the
remains of an `up` that never finished, or of a cluster whose processes are all gone, are removed
before starting over.

Exit codes: 0 done; 1 the cluster could not be built, started, reached or stopped (or `status`
found a component not ok); 2 a usage error (argparse's, or an `up` refused).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from harness import controlplane
from harness import nodes as realnodes
from harness.controlplane import CLUSTER_DIR_ENV, STATE_FILE, Cluster, ControlPlaneError
from harness.gobuild import DEFAULT_MINOR, KUBERNETES_ENV, RELEASES, BuildError, Release, build, release

EXIT_FAILED = 1
EXIT_USAGE = 2
# The processes of the control plane itself (a cluster's health report also names its nodes).
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "netqos-scheduler")
NOT_RUNNING = "not running"


@dataclass(frozen=True)
class UpDecision:
    """What `up` does about the cluster recorded in its directory: start over (nothing is up
    there), reuse it (it is up, healthy, and what was asked for) or refuse (it is up; `reason`)."""

    action: Literal["start over", "reuse", "refuse"]
    reason: str = ""


def decide_up(existing: Cluster, health: Mapping[str, str], of: Release, nodes: int) -> UpDecision:
    """`existing`: the cluster recorded in the directory (`controlplane.attach`); `health`: its
    `Cluster.healthy()` report; `of` and `nodes`: what this `up` asks for."""
    finished = health.get("start") == "ok"
    running = any(health.get(name, NOT_RUNNING) != NOT_RUNNING for name in COMPONENTS)
    if not (finished and running):
        return UpDecision("start over")
    differences = []
    if existing.kubernetes != of.version:
        differences.append(f"Kubernetes {of.version} was asked for")
    if len(existing.nodes) != nodes:
        differences.append(f"--nodes {nodes} was asked for")
    unhealthy = [f"{name} {state}" for name, state in health.items() if state != "ok"]
    if unhealthy:
        differences.append(f"it is not healthy ({'; '.join(unhealthy)})")
    if differences:
        return UpDecision("refuse", ", ".join(differences))
    return UpDecision("reuse")


def describe(cluster: Cluster) -> str:
    """The cluster in a few words: its directory, release and nodes with their labels."""
    if not cluster.nodes:
        nodes = "no nodes"
    else:
        count = f"{len(cluster.nodes)} node{'s' if len(cluster.nodes) > 1 else ''}"
        nodes = f"{count}: " + ", ".join(node_lines(cluster))
    return f"{cluster.directory} (Kubernetes {cluster.kubernetes}, {nodes})"


def refusal(cluster: Cluster, reason: str) -> str:
    """The one line `up` prints when it refuses."""
    return (
        f"a cluster is up in {describe(cluster)} and {reason}; stop it first with 'scripts/cluster down' "
        f"(or set ${CLUSTER_DIR_ENV} to another directory to run a second cluster)"
    )


def node_lines(cluster: Cluster) -> list[str]:
    """Each real node of the cluster with the labels the harness gives it: "fast-1 net=high"."""
    labels = dict(realnodes.node_names(len(cluster.nodes)))
    lines = []
    for name in cluster.nodes:
        given = " ".join(f"{key}={value}" for key, value in sorted(labels.get(name, {}).items()))
        lines.append(f"{name} {given or '(no labels)'}")
    return lines


def non_negative(text: str) -> int:
    """argparse's type for --nodes: a count, so 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give 0 (no nodes) or more")
    return value


def _print_env(cluster: Cluster) -> None:
    for key, value in {**cluster.env(), KUBERNETES_ENV: cluster.minor}.items():
        value = f"{cluster.bin_dir}:$PATH" if key == "PATH" else value
        print(f'export {key}="{value}"')


def _print_nodes(cluster: Cluster) -> None:
    for line in node_lines(cluster):
        print(f"node {line}", file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/cluster",
        description=(
            "A real Kubernetes control plane on loopback, built from its Go modules (etcd, kube-apiserver, "
            "kube-controller-manager, kube-scheduler with the NetQoS plugin as a second profile). "
            f"The state directory is ${CLUSTER_DIR_ENV} (default {controlplane.default_directory()})."
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    versions = ", ".join(f"{m} ({r.version})" for m, r in RELEASES.items())
    which = argparse.ArgumentParser(add_help=False)
    which.add_argument(
        "--kubernetes",
        metavar="MINOR",
        help=f"the Kubernetes minor release: {versions}; default ${KUBERNETES_ENV}, else {DEFAULT_MINOR}",
    )
    sub.add_parser(
        "build", parents=[which], help="build (or find in the cache) the binaries; print where and how long it took"
    )
    start = sub.add_parser(
        "up",
        parents=[which],
        help="build when needed, start, print the build and start times, the nodes and the environment; "
        "refuses (exit 2) while another cluster is up in the directory",
    )
    named = ", ".join(
        f"{name} ({' '.join(f'{k}={v}' for k, v in labels.items())})" for name, labels in realnodes.NAMED_NODES
    )
    start.add_argument(
        "--nodes",
        type=non_negative,
        default=0,
        metavar="N",
        help="also start N real nodes (kubelet, containerd, kube-proxy; root; installs Debian's containerd, runc "
        f"and CNI plugins when missing): {named}, then node-1, node-2... unlabelled",
    )
    sub.add_parser("down", help="stop the cluster and remove its directory")
    sub.add_parser("env", help='print export lines for the cluster (eval "$(scripts/cluster env)")')
    sub.add_parser("status", help="each component's process and health; exit 1 when one is not ok")
    return parser


def _build_or_up(command: str, of: Release, nodes: int) -> int:
    directory = controlplane.default_directory()
    if command == "up" and (directory / STATE_FILE).exists():
        existing = controlplane.attach(directory)
        decision = decide_up(existing, existing.healthy(), of, nodes)
        if decision.action == "refuse":
            print(f"scripts/cluster up: {refusal(existing, decision.reason)}", file=sys.stderr)
            return EXIT_USAGE
        if decision.action == "reuse":
            print(f"a cluster is already up in {describe(existing)}", file=sys.stderr)
            _print_nodes(existing)
            _print_env(existing)
            return 0
        existing.down()  # the remains of an `up` that never finished, or of processes all gone
    built = build(of=of)
    how = "cached" if built.cached else f"{built.seconds:.1f} s"
    print(f"build: {how} ({built.bin_dir})", file=sys.stderr)
    if command == "build":
        return 0
    cluster = controlplane.up(directory, built.bin_dir, of, nodes)
    print(
        f"start: {cluster.start_seconds:.1f} s (Kubernetes {cluster.kubernetes}, API server {cluster.server}, "
        f"logs in {directory}/logs)",
        file=sys.stderr,
    )
    _print_nodes(cluster)
    _print_env(cluster)
    return 0


def _down() -> int:
    directory = controlplane.default_directory()
    if not (directory / STATE_FILE).exists():
        left = realnodes.teardown(directory)  # nodes of an `up` killed before it recorded more
        if left:
            raise ControlPlaneError(f"could not remove {', '.join(left)}")
        print(f"no cluster in {directory}", file=sys.stderr)
        return 0
    controlplane.attach(directory).down()
    print(f"stopped the cluster in {directory}", file=sys.stderr)
    return 0


def _status(cluster: Cluster) -> int:
    report = cluster.healthy()
    for name, health in report.items():
        pid = cluster.pids.get(name) or cluster.node_pids.get(name) or "-"
        print(f"{name:<25} pid {pid:<8} {health}")
    print(f"{'kubeconfig':<25} {cluster.kubeconfig}")
    print(f"{'kubernetes':<25} {cluster.kubernetes}")
    return 0 if all(v == "ok" for v in report.values()) else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if args.command in ("build", "up"):
            return _build_or_up(args.command, release(args.kubernetes), getattr(args, "nodes", 0))
        if args.command == "down":
            return _down()
        cluster = controlplane.attach(controlplane.default_directory())
        if args.command == "env":
            _print_env(cluster)
            return 0
        return _status(cluster)
    except (ControlPlaneError, BuildError, realnodes.NodesError) as err:
        print(f"scripts/cluster {args.command}: {err}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
