"""`scripts/cluster up` never replaces a cluster that is up (harness.clustercli): asked again for
what runs, it reuses it; asked for anything else, it refuses in one line naming the cluster and how
to stop it; only the remains of an `up` that never finished, or of processes all gone, are started
over. Decided over the state file a running cluster records (tests/fixtures/cluster/state.json:
`scripts/cluster up --nodes 2` on 1.37); tests/e2e/realnodes/test_cluster_lifecycle.py runs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import clustercli, controlplane, gobuild, nodes
from tests.fixtures import FIXTURES

STATE = FIXTURES / "cluster" / controlplane.STATE_FILE
HEALTHY = {
    "etcd": "ok",
    "kube-apiserver": "ok",
    "kube-controller-manager": "ok",
    "netqos-scheduler": "ok",
    "node fast-1": "ok",
    "node slow-1": "ok",
    "start": "ok",
}
UNFINISHED = {**HEALTHY, "start": "unfinished: the 'up' that started it did not finish"}
GONE = {**dict.fromkeys(clustercli.COMPONENTS, "not running"), "start": "ok"}
API_SERVER_DOWN = {**HEALTHY, "kube-apiserver": "/readyz unreachable: [Errno 111] Connection refused"}
DEFAULT, OLDEST = gobuild.release(), gobuild.release("1.34")


@pytest.fixture
def running(tmp_path: Path) -> controlplane.Cluster:
    """The cluster `scripts/cluster up --nodes 2` recorded, attached as `up` attaches it."""
    shutil.copy(STATE, tmp_path / controlplane.STATE_FILE)
    return controlplane.attach(tmp_path)


def test_the_fixture_is_what_a_cluster_records(running: controlplane.Cluster):
    written = running.directory / "saved"
    written.mkdir()
    running.directory = written
    running.save()
    assert json.loads((written / controlplane.STATE_FILE).read_text()) == json.loads(STATE.read_text())


@pytest.mark.parametrize(
    ("health", "of", "nodes", "action", "reason"),
    [
        (HEALTHY, DEFAULT, 2, "reuse", ""),
        (HEALTHY, DEFAULT, 0, "refuse", "--nodes 0 was asked for"),
        (HEALTHY, DEFAULT, 3, "refuse", "--nodes 3 was asked for"),
        (HEALTHY, OLDEST, 2, "refuse", "Kubernetes v1.34.4 was asked for"),
        (
            API_SERVER_DOWN,
            DEFAULT,
            2,
            "refuse",
            "it is not healthy (kube-apiserver /readyz unreachable: [Errno 111] Connection refused)",
        ),
        (UNFINISHED, DEFAULT, 0, "start over", ""),
        (GONE, DEFAULT, 0, "start over", ""),
    ],
    ids=[
        "the-same-up-again-reuses-the-running-cluster",
        "a-plain-up-after-up-nodes-2-is-refused",
        "another-node-count-is-refused",
        "another-release-is-refused",
        "a-cluster-up-but-unhealthy-is-refused-not-replaced",
        "the-remains-of-an-up-that-never-finished-are-started-over",
        "a-cluster-whose-processes-are-all-gone-is-started-over",
    ],
)
def test_up_reuses_refuses_or_starts_over(running, health, of, nodes, action, reason):
    assert clustercli.decide_up(running, health, of, nodes) == clustercli.UpDecision(action, reason)


def test_the_refusal_is_one_line_naming_the_cluster_its_nodes_and_how_to_stop_it(running):
    line = clustercli.refusal(running, "--nodes 0 was asked for")
    assert "\n" not in line
    assert line == (
        f"a cluster is up in {running.directory} (Kubernetes v1.37.2, 2 nodes: fast-1 net=high, slow-1 net=low) "
        "and --nodes 0 was asked for; stop it first with 'scripts/cluster down' "
        "(or set $NETQOS_CLUSTER_DIR to another directory to run a second cluster)"
    )


@pytest.mark.parametrize(
    ("count", "lines"),
    [
        (0, []),
        (1, ["fast-1 net=high"]),
        (4, ["fast-1 net=high", "slow-1 net=low", "node-1 (no labels)", "node-2 (no labels)"]),
    ],
)
def test_the_nodes_are_fast_slow_then_unlabelled_each_printed_with_its_labels(tmp_path: Path, count, lines):
    names = [name for name, _labels in nodes.node_names(count)]
    cluster = controlplane.Cluster(tmp_path, tmp_path / "bin", ports={}, pids={}, nodes=names)
    assert clustercli.node_lines(cluster) == lines


@pytest.mark.parametrize("nodes", ["-1", "two"])
def test_up_refuses_a_node_count_that_is_not_a_whole_number_of_zero_or_more(nodes, capsys):
    with pytest.raises(SystemExit) as exited:
        clustercli.parser().parse_args(["up", "--nodes", nodes])
    assert exited.value.code == clustercli.EXIT_USAGE
    assert "argument --nodes" in capsys.readouterr().err


def test_saving_replaces_the_state_whole_so_a_reader_never_meets_it_half_written(running: controlplane.Cluster):
    path = running.directory / controlplane.STATE_FILE
    before = path.read_text()
    with open(path) as reader:
        running.nodes = [*running.nodes, "fast-2"]
        running.save()
        # a reader that opened the file before the save still reads the earlier state, whole
        assert reader.read() == before
    assert json.loads(path.read_text())["nodes"] == running.nodes
    assert sorted(p.name for p in running.directory.iterdir()) == [controlplane.STATE_FILE]
