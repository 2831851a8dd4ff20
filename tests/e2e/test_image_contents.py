"""The image built from the Dockerfile (`scripts/image build`, harness/image.py) carries the product
and nothing else, and the product works in it.

- Its root filesystem holds the standard top-level directories and nothing more, and none of: a
  test tree, the test harness or the benchmarks, a compiler, pip or setuptools, stray bytecode, a
  package manager's cache. Its size is at most half of what the image of the single-stage
  Dockerfile measured (399 MB; docs/evidence/image-size-*.md).
- Its bytecode is compiled at build time, unchecked-hash (Python never compares it with its source
  nor rewrites it: the root filesystem is read-only in the pod), beside its source, for every module
  of the standard library and the environment but the kubernetes client's generated API and model
  classes; `serve` compiles nothing as it starts, `rebalance` only those generated classes.
- In a container of it, as its user: `serve --help` and `rebalance --help`; `serve` answers an
  AdmissionReview over TLS with the certificate and policy mounted where the Deployment mounts
  them; `rebalance` plans against the fake API server (harness/kubeapi.py) through the
  `kubernetes` client, every dependency it imports present (the Dockerfile removes some the
  client's installation brings).

Building needs root and buildah (installed from Debian when missing): elsewhere these tests skip,
saying why, except under CI (CI=true), where that fails.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness import image, kubeapi, reviews
from harness.certs import make_certs
from harness.kubeapi import Snapshot
from harness.server import Server, free_port
from tests.fixtures import CLASSIC_TERMS, REPO
from webhook.manifests import webhook_configuration
from webhook.policy_file import load_policy

# Half of the 399.7 MB the single-stage Dockerfile's image measured (docs/evidence/image-size-*.md).
SIZE_BUDGET = 200_000_000
TOP_LEVEL = "bin boot dev etc home lib lib64 media mnt opt proc root run sbin srv sys tmp usr var".split()
BIN_DIRS = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/", "/usr/local/sbin/", "/opt/netqos/bin/")
COMPILER = re.compile(r"([\w.-]+-)?(gcc|g\+\+|cc|c\+\+|cpp|clang|ld|as|go|rustc)(-[\d.]+)?")
POLICY = REPO / "deploy/base/policy.yaml"
SERVE_READY = 60.0
SITE = "/opt/netqos/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"
# The kubernetes client's generated classes, which the Dockerfile does not compile: the client
# loads them one by one, and only `rebalance` (never `serve`) needs them.
UNCOMPILED = re.compile(r"/kubernetes/client/(api|models)/")
# `python3 -v` says this of each module it compiles from its source rather than loading its bytecode.
# ("# code object from '/....pyc'" when it loads the bytecode.)
COMPILED_AT_START = re.compile(r"^# code object from (?P<source>/\S+\.py)$", re.MULTILINE)


def names(path: str) -> list[str]:
    return path.strip("/").split("/")


def in_bin_dir(path: str) -> bool:
    return path.startswith(BIN_DIRS)


# (what must not be in the image, does this path belong to it, a path that does)
FORBIDDEN: list[tuple[str, Callable[[str], bool], str]] = [
    (
        "a test tree",
        lambda path: bool({"tests", "test"} & set(names(path)[:-1])),
        "/opt/netqos/lib/python3.11/site-packages/gevent/tests/test__core.py",
    ),
    (
        "the test harness or the benchmarks",
        lambda path: bool({"harness", "benchmarks"} & set(names(path))),
        "/opt/netqos/lib/python3.11/site-packages/harness/image.py",
    ),
    (
        "a compiler",
        lambda path: (in_bin_dir(path) and bool(COMPILER.fullmatch(names(path)[-1]))) or names(path)[-1] == "cc1",
        "/usr/bin/x86_64-linux-gnu-gcc-12",
    ),
    (
        "pip, setuptools or wheel",
        lambda path: (
            bool({"pip", "setuptools", "wheel", "pkg_resources"} & set(names(path)))
            or (in_bin_dir(path) and names(path)[-1].startswith("pip"))
        ),
        "/usr/local/lib/python3.12/site-packages/pip/__init__.py",
    ),
    (
        "stray bytecode: outside a __pycache__ directory, or for an optimisation level",
        lambda path: path.endswith(".pyc") and (names(path)[-2] != "__pycache__" or ".opt-" in names(path)[-1]),
        "/opt/netqos/lib/python3.11/site-packages/webhook/cli.pyc",
    ),
    (
        "a package manager's cache or lists",
        lambda path: (
            path.startswith(("/var/lib/apt/lists/", "/var/cache/apt/", "/var/cache/debconf/")) or "/.cache/" in path
        ),
        "/root/.cache/pip/http-v2/0/a",
    ),
]


@pytest.fixture(scope="module")
def built() -> image.Built:
    reason = image.unavailable_reason()
    if reason:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI must build the image")
        pytest.skip(reason)
    return image.build()


@pytest.fixture(scope="module")
def held(built: image.Built) -> image.Contents:
    return image.contents()


# --- what it holds -----------------------------------------------------------------------------


@pytest.mark.parametrize("what, belongs, planted", FORBIDDEN, ids=[row[0] for row in FORBIDDEN])
def test_each_rule_recognises_what_it_forbids(what: str, belongs: Callable[[str], bool], planted: str) -> None:
    assert belongs(planted), f"{planted} is {what}"
    assert not belongs("/opt/netqos/lib/python3.11/site-packages/webhook/cli.py")


def test_the_top_level_holds_the_standard_directories_only(held: image.Contents) -> None:
    assert held.top_level == TOP_LEVEL


def test_the_image_is_at_most_half_the_single_stage_images_size(built: image.Built) -> None:
    assert built.size <= SIZE_BUDGET, f"{built.size / 1e6:.1f} MB; where it goes: scripts/image record"


@pytest.mark.parametrize("what, belongs", [row[:2] for row in FORBIDDEN], ids=[row[0] for row in FORBIDDEN])
def test_the_image_holds_none_of(held: image.Contents, what: str, belongs: Callable[[str], bool]) -> None:
    found = sorted(path for path in held.paths if belongs(path))
    assert not found, f"{what} in the image: {found[:10]}"


def source_of(pyc: str) -> str:
    """The module a __pycache__ file is compiled from: .../__pycache__/cli.cpython-311.pyc -> .../cli.py."""
    directory, _, name = pyc.rpartition("/__pycache__/")
    return f"{directory}/{name.split('.')[0]}.py"


def bytecode_of(source: str) -> str:
    directory, _, name = source.rpartition("/")
    return f"{directory}/__pycache__/{name.removesuffix('.py')}.cpython-311.pyc"


def test_every_bytecode_file_is_unchecked_hash_and_beside_its_source(held: image.Contents) -> None:
    assert held.bytecode, "the image holds no bytecode"
    checked = sorted(path for path, flags in held.bytecode.items() if flags != image.PYC_UNCHECKED_HASH)
    assert not checked, f"bytecode Python would check against its source, or rewrite: {checked[:10]}"
    orphans = sorted(path for path in held.bytecode if source_of(path) not in held.paths)
    assert not orphans, f"bytecode without its source: {orphans[:10]}"


@pytest.mark.parametrize("tree", [SITE, STDLIB])
def test_every_module_that_ships_has_its_bytecode(held: image.Contents, tree: str) -> None:
    modules = [path for path in held.sizes if path.startswith(f"{tree}/") and path.endswith(".py")]
    assert modules
    missing = sorted(path for path in modules if not UNCOMPILED.search(path) and bytecode_of(path) not in held.paths)
    assert not missing, f"{len(missing)} modules without bytecode: {missing[:10]}"


def test_the_product_is_installed_once_and_from_its_wheel(held: image.Contents) -> None:
    packages = sorted(path for path in held.paths if path.endswith("/webhook/__init__.py"))
    assert packages == ["/opt/netqos/lib/python3.11/site-packages/webhook/__init__.py"]
    assert not [path for path in held.paths if names(path)[0] in ("src", "wheels", "app")]


# --- the product works in it -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["serve", "rebalance"])
def test_the_command_prints_its_help(built: image.Built, command: str) -> None:
    done = image.run_in(image.IMAGE, "netqos-webhook", command, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: netqos-webhook {command} ")


def readable(directory: Path) -> Path:
    """`directory` and its files readable by the image's user, as a Secret's or ConfigMap's volume
    is (pytest's directories are root's alone)."""
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


# The entry point run by `python3 -v`, which says how it gets each module's code object.
VERBOSE = ("python3", "-v", "/opt/netqos/bin/netqos-webhook")


@contextmanager
def serve_in_image(tmp_path: Path, entry: tuple[str, ...] = ("netqos-webhook",)) -> Iterator[Server]:
    """`serve` (run as `entry`) in a container of the image, as the Deployment runs it: the
    certificate in /tls, the policy in /config, one worker, on a loopback port; ready."""
    certs = make_certs(tmp_path / "tls")
    port = free_port()
    log = tmp_path / "serve.log"
    with image.container() as made, open(log, "wb") as out:
        command = image.run_command(
            made,
            *entry,
            "serve",
            f"--bind=127.0.0.1:{port}",
            "--certfile=/tls/tls.crt",
            "--keyfile=/tls/tls.key",
            "--config=/config/policy.yaml",
            "--workers=1",
            volumes=[(readable(certs.directory), "/tls"), (POLICY.parent, "/config")],
        )
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(process, port, certs, log)
        try:
            wait_ready(server)
            yield server
        finally:
            server.stop()


@pytest.fixture
def serving(built: image.Built, tmp_path: Path) -> Iterator[Server]:
    with serve_in_image(tmp_path) as server:
        yield server


def wait_ready(server: Server) -> None:
    deadline = time.monotonic() + SERVE_READY
    while time.monotonic() < deadline:
        assert server.process.poll() is None, f"serve exited {server.process.returncode}:\n{server.log_tail()}"
        try:
            if server.request("GET", "/readyz").status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"serve not ready within {SERVE_READY:.0f} s:\n{server.log_tail()}")


def test_serve_answers_a_review_over_tls_with_the_preference(serving: Server) -> None:
    answer = serving.review(reviews.review(reviews.pod()))
    response = answer["response"]
    assert (response["allowed"], response["patchType"]) == (True, "JSONPatch")
    assert "nodeAffinity" in json.dumps(json.loads(base64.b64decode(response["patch"])))


def test_serve_compiles_nothing_as_it_starts_and_answers(built: image.Built, tmp_path: Path) -> None:
    with serve_in_image(tmp_path, VERBOSE) as server:
        assert server.review(reviews.review(reviews.pod()))["response"]["allowed"]
        log = server.logs()
    assert "matches /opt/netqos/lib/python3.11/site-packages/webhook/" in log, "bytecode loaded, said by -v"
    compiled = COMPILED_AT_START.findall(log)
    assert not compiled, f"serve compiled {len(compiled)} modules as it started: {compiled[:10]}"


# --- rebalance, through the kubernetes client ----------------------------------------------------

NS = "netqos-system"
QOS = {"qos": "latency-sensitive", "app": "web"}
CPU1 = {"requests": {"cpu": "1", "memory": "1Gi"}}


def sized(obj: dict[str, Any], cpu: str) -> dict[str, Any]:
    obj["status"] = {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}
    return obj


def world() -> list[dict[str, Any]]:
    """The webhook registered and serving; a Deployment's labelled pod (its only replica) on the
    net=low node, the net=high node with room for it."""
    registration = webhook_configuration(load_policy(POLICY), namespace=NS, ca_bundle=b"-----BEGIN CERTIFICATE-----")
    endpoints = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "netqos-webhook-a",
            "namespace": NS,
            "labels": {"kubernetes.io/service-name": "netqos-webhook"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
    }
    template = {
        "metadata": {"labels": QOS},
        "spec": {"containers": [{"name": "app", "image": "app:1", "resources": CPU1}]},
    }
    pod = kubeapi.pod("shop", "web-slow", QOS, "slow-1", ("ReplicaSet", "web-rs"), preferred=CLASSIC_TERMS)
    pod["spec"]["containers"][0]["resources"] = CPU1
    return [
        registration,
        endpoints,
        *(kubeapi.namespace(name) for name in (NS, "kube-system", "shop")),
        sized(kubeapi.node("fast-1", "high"), "4"),
        sized(kubeapi.node("slow-1", "low"), "4"),
        kubeapi.workload("Deployment", "shop", "web"),
        kubeapi.workload("ReplicaSet", "shop", "web-rs", owner=("Deployment", "web"), template=template),
        pod,
    ]


def rebalance_in_image(
    tmp_path: Path, entry: tuple[str, ...] = ("netqos-webhook",)
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`rebalance` (run as `entry`) in a container of the image against the fake API server holding
    `world()`: what it did, and the requests the API server answered."""
    with kubeapi.serve(Snapshot().add_all(world()), tmp_path) as api:
        done = image.run_in(
            image.IMAGE,
            *entry,
            *("rebalance", "--kubeconfig=/kube/kubeconfig", "--config=/config/policy.yaml"),
            *("--min-replicas=1", "-o", "json"),
            volumes=[(readable(api.kubeconfig.parent), "/kube"), (POLICY.parent, "/config")],
        )
        return done, list(api.requests)


def test_rebalance_plans_through_the_kubernetes_client(built: image.Built, tmp_path: Path) -> None:
    done, asked = rebalance_in_image(tmp_path)
    assert done.returncode == 3, done.stderr[-2000:]  # pods to move, none moved (no --apply)
    report = json.loads(done.stdout)
    assert [(c["name"], c["action"], c["target"]) for c in report["candidates"]] == [("web-slow", "evict", "fast-1")]
    assert "/api/v1/nodes?limit=500" in asked, "the client in the image read the fake API server"


def test_rebalance_compiles_only_the_kubernetes_clients_generated_classes(built: image.Built, tmp_path: Path) -> None:
    done, _ = rebalance_in_image(tmp_path, VERBOSE)
    assert done.returncode == 3, done.stderr[-2000:]
    compiled = COMPILED_AT_START.findall(done.stderr)
    assert [path for path in compiled if UNCOMPILED.search(path)], "rebalance reads through the generated classes"
    others = [path for path in compiled if not UNCOMPILED.search(path)]
    assert not others, f"rebalance compiled {len(others)} other modules as it started: {others[:10]}"
