"""The import contracts catch what they claim: each violation below, injected into a copy of the
tree, breaks the named contract of `lint-imports` (the gate scripts/lint runs), and the copy as
it is keeps every contract."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import REPO

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LAYERS = "Layers: every module of webhook/ in one, each importing only from the layers below it"
ONLY_CLUSTER = "Only webhook.cluster imports the kubernetes client"
ACYCLIC = "No import cycle among the modules of any package of webhook/"
COMMANDS_APART = "No command imports another"
SERVER_APART = (
    "The serving process imports no command, analysis, scheduler, certificate maker or cluster client, even indirectly"
)
SCHEDULER_APART = "The scheduler imports no command and no cluster client, even indirectly"
STATUS_LAYERS = "Layers of the status package: registration and coverage apart, over what status reads and reports"
PURE = "The pure core imports no web framework, server, cluster client or cryptography"
CLUSTER_READ = (
    "The commands read a cluster through webhook.commands.clusterread: only it and the commands that write import "
    "webhook.cluster"
)
CONTRACTS = (
    LAYERS,
    ONLY_CLUSTER,
    ACYCLIC,
    COMMANDS_APART,
    SERVER_APART,
    SCHEDULER_APART,
    PURE,
    STATUS_LAYERS,
    CLUSTER_READ,
)


def copy_of_the_tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(REPO / "webhook", root / "webhook", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", root)
    return root


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    # From the copy's root, whose webhook/ comes first on sys.path (before the editable install).
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120)


def broken(output: str) -> set[str]:
    """The names of the contracts the report says are broken (a long name wraps over lines)."""
    text = " ".join(output.split())
    return {name for name in CONTRACTS if f"{name} BROKEN" in text}


def test_scripts_lint_runs_the_import_contracts():
    assert '"$bin/lint-imports" --no-cache' in (REPO / "scripts/lint").read_text()


def test_the_tree_as_it_is_keeps_every_contract(tmp_path):
    done = lint_imports(copy_of_the_tree(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    "module, line, contracts",
    [
        # analysis importing a command (here the server's), which imports it back; the status
        # command now reaches the serve command through it
        ("webhook/status/coverage.py", "from webhook.commands import serve", {LAYERS, ACYCLIC, COMMANDS_APART}),
        # a second user of the kubernetes client, imported at the top of a pure module
        ("webhook/manifests.py", "import kubernetes", {ONLY_CLUSTER, PURE}),
        # the core turned upside down: affinity is below policy, which imports it (a cycle too)
        ("webhook/affinity.py", "from webhook import policy", {LAYERS, ACYCLIC}),
        # a cycle between a command and a module the commands share (so others reach it too)
        ("webhook/commands/tables.py", "from webhook.commands import review", {ACYCLIC, COMMANDS_APART}),
        # one command borrowing another's helper (no cycle, no layer crossed)
        ("webhook/commands/rebalance.py", "from webhook.commands import status", {COMMANDS_APART}),
        # ... or reaching it through a module the commands share
        ("webhook/commands/tables.py", "from webhook.commands import status", {COMMANDS_APART}),
        # the server reaching for an analysis the layers allow it (status sits below serving)
        ("webhook/serving/app.py", "from webhook import status", {SERVER_APART}),
        # ... or the scheduler, through a module the server imports
        ("webhook/policy_file.py", "from webhook.scheduler import cycle", {SERVER_APART}),
        # the scheduler reading flags of the command line (whose commands import it back)
        ("webhook/scheduler/config.py", "from webhook.commands import flags", {LAYERS, SCHEDULER_APART, ACYCLIC}),
        # the scheduler asking the cluster itself
        ("webhook/scheduler/read.py", "import kubernetes", {ONLY_CLUSTER, SCHEDULER_APART, PURE}),
        # status's two checks tangled: the registration check reaching into coverage
        ("webhook/status/registration.py", "from webhook.status import coverage", {STATUS_LAYERS}),
        # a command that only reads reaching around the shared reading module
        ("webhook/commands/explain.py", "from webhook import cluster", {CLUSTER_READ}),
        ("webhook/commands/monitor.py", "from webhook.cluster import watch", {CLUSTER_READ}),
        ("webhook/commands/plan.py", "import webhook.cluster", {CLUSTER_READ}),
    ],
    ids=[
        "status-imports-commands.serve",
        "manifests-imports-kubernetes",
        "affinity-imports-policy",
        "command-cycle",
        "command-imports-command",
        "command-imports-command-indirectly",
        "server-imports-status",
        "server-imports-scheduler-indirectly",
        "scheduler-imports-commands",
        "scheduler-imports-kubernetes",
        "status-registration-imports-coverage",
        "explain-imports-cluster",
        "monitor-imports-cluster-watch",
        "plan-imports-cluster",
    ],
)
def test_an_injected_violation_breaks_its_contract(tmp_path, module, line, contracts):
    root = copy_of_the_tree(tmp_path)
    path = root / module
    source = path.read_text()
    anchor = "from __future__ import annotations\n"
    path.write_text(source.replace(anchor, f"{anchor}\n{line}  # noqa: F401\n", 1))
    done = lint_imports(root)
    assert done.returncode == 1, done.stdout
    assert broken(done.stdout) == contracts, done.stdout


def test_a_module_in_no_layer_breaks_the_layers_contract(tmp_path):
    root = copy_of_the_tree(tmp_path)
    (root / "webhook/unplaced.py").write_text('"""A module nobody put in a layer."""\n')
    done = lint_imports(root)
    assert done.returncode == 1 and broken(done.stdout) == {LAYERS}, done.stdout
    assert "webhook.unplaced" in done.stdout


# --- every read of a live cluster goes through webhook.commands.clusterread ------------------------
# The contract above keeps the commands from importing webhook.cluster; a Reader handed to them
# still carries its read methods. This check holds the reads themselves to clusterread.

READ_METHODS = frozenset({"list", "get", "get_many", "version", "proxy_get", "may", "admit_pod"})
CLUSTER_READS = frozenset({"connect", "Reader", "list_pages", "watch"})
# What a command that writes reads to write it: rebalance's record of its evictions (a ConfigMap),
# read before it is rewritten and again when another writer changed it first.
WRITERS_READS = {"rebalance.py": {"reader.get", "cluster.Reader"}}


def _receiver(node: ast.expr) -> str:
    """`reader` for `reader`, `self.reader`, `cluster` for `cluster`, `webhook.cluster`; else ''."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "reader" if name.endswith("reader") else "cluster" if name == "cluster" else ""


def cluster_reads(source: str) -> set[str]:
    """The reads of a live cluster `source` makes itself: a Reader's read methods called on a
    `reader`, and webhook.cluster's connect, Reader, list_pages and watch called, as `cluster.NAME`
    or imported by name (a Reader named in an annotation reads nothing)."""
    tree = ast.parse(source)
    imported = {  # local name -> webhook.cluster's name
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "webhook.cluster"
        for alias in node.names
        if alias.name in CLUSTER_READS
    }
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in imported:
            found.add(f"cluster.{imported[func.id]}")
        elif isinstance(func, ast.Attribute):
            receiver = _receiver(func.value)
            methods = READ_METHODS if receiver == "reader" else CLUSTER_READS if receiver == "cluster" else set()
            if func.attr in methods:
                found.add(f"{receiver}.{func.attr}")
    return found


@pytest.mark.parametrize(
    "source, reads",
    [
        ('reader.list("Pod", field_selector="spec.nodeName!=")', {"reader.list"}),
        ('self.reader.get("Node", "a")', {"reader.get"}),
        ('reader.get_many("ReplicaSet", keys)', {"reader.get_many"}),
        ("reader.version()", {"reader.version"}),
        ('reader.proxy_get("ns", "pod", 8443, "/policy")', {"reader.proxy_get"}),
        ('reader.may("create", "pods", "ns")', {"reader.may"}),
        ('reader.admit_pod("ns", pod)', {"reader.admit_pod"}),
        ("cluster.connect(None, None)", {"cluster.connect"}),
        ("cluster.Reader(connection)", {"cluster.Reader"}),
        ('cluster.list_pages(reader, "Node")', {"cluster.list_pages"}),
        ('cluster.watch(reader, "Pod", "1")', {"cluster.watch"}),
        ('webhook.cluster.watch(reader, "Pod", "1")', {"cluster.watch"}),
        ("from webhook.cluster import connect as c\nc()", {"cluster.connect"}),
        # reads through clusterread, a dict's get, a reader's other methods: none of them
        ('clusterread.bound_pods(reader)\nclusterread.watch(reader, "Pod", "1")', set()),
        ('labels.get("qos")\nreader.restarting(read)\nreader.cluster.host', set()),
        ("from webhook.cluster import ClusterError\nraise ClusterError('x')", set()),
        ("from webhook.cluster import Reader\ndef f(reader: Reader) -> None: ...", set()),
    ],
)
def test_a_read_around_clusterread_is_found(source, reads):
    assert cluster_reads(source) == reads


def test_only_clusterread_reads_the_cluster_for_the_commands():
    commands = REPO / "webhook/commands"
    found = {
        path.name: reads
        for path in sorted(commands.glob("*.py"))
        if path.name != "clusterread.py" and (reads := cluster_reads(path.read_text()))
    }
    assert found == WRITERS_READS, "read the cluster through webhook.commands.clusterread"
