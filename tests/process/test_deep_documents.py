"""Documents nested thousands of levels deep: every command refuses the file in one line (exit 2)
naming it and the limit, and a server whose policy file becomes such a document keeps the last
good policy, answers /mutate and /readyz, and counts the refusal for the alert."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from harness.patches import decoded_patch, pod_review
from harness.pods import pod
from harness.server import metric_value, start_server
from harness.volume import MountedVolume
from harness.waiting import until
from tests.fixtures import REPO
from webhook.documents import MAX_DEPTH

POD = str(REPO / "deploy" / "examples" / "test-pod.yaml")
NODES = str(REPO / "deploy" / "examples" / "nodes.yaml")
POLICY = REPO / "deploy" / "base" / "policy.yaml"
LATENCY_POD = pod({"qos": "latency-sensitive"}, containers=[{"name": "c", "image": "i"}])


def nested(levels: int, key: str = "rules") -> bytes:
    """A mapping whose `key` holds lists within lists: `levels` lists and mappings in all."""
    return f'{{"{key}": {"[" * (levels - 1)}{"]" * (levels - 1)}}}\n'.encode()


def netqos(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        env={"PATH": "", "KUBECONFIG": "/nonexistent/kubeconfig"},
    )


# the command line ({deep} is the deep file), the file the message names
COMMANDS = [
    ("review --config {deep} " + POD, "policy file {deep}"),
    ("review {deep}", "input file {deep}"),
    ("review -", "input file -"),
    ("review {deep} -o pod", "input file {deep}"),
    ("explain --pod {deep} --nodes " + NODES, "pod file {deep}"),
    ("explain --pod " + POD + " --nodes {deep}", "nodes file {deep}"),
    ("explain --pod " + POD + " --nodes " + NODES + " --config {deep}", "policy file {deep}"),
    ("manifests --config {deep}", "policy file {deep}"),
    ("status --kubeconfig {deep}", "cannot use kubeconfig file {deep}"),
]


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 5_000, 100_000])
@pytest.mark.parametrize(("command", "named"), COMMANDS, ids=[c[0].split(" {")[0] for c in COMMANDS])
def test_a_document_nested_too_deep_is_one_line_naming_the_file_and_the_limit(tmp_path, command, named, levels):
    deep = tmp_path / "deep.yaml"
    deep.write_bytes(nested(levels))
    started = time.monotonic()
    done = netqos(*command.format(deep=deep).split(), stdin=deep.read_bytes())
    assert time.monotonic() - started < 30
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert named.format(deep=deep) in stderr
    assert f"nested more than {MAX_DEPTH} levels deep at line 1" in stderr


def test_a_document_at_the_limit_is_read_and_printed(tmp_path):
    document = {**LATENCY_POD, "metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}}}
    inner: object = 0
    for _ in range(MAX_DEPTH - 2):  # the pod and its spec are the first two levels
        inner = [inner]
    document["spec"] = {**document["spec"], "x": inner}
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(document))
    for output in ("pod", "json", "patch"):
        done = netqos("review", str(path), "-o", output)
        assert done.returncode == 0, done.stderr.decode()[-500:]


def test_a_served_policy_file_turned_deep_keeps_the_last_good_policy_and_is_counted(tmp_path):
    volume = MountedVolume(tmp_path / "config", {"policy.yaml": POLICY.read_bytes()})
    with start_server(tmp_path, "--config", str(volume.path("policy.yaml"))) as server:
        before = decoded_patch(server.review(pod_review(LATENCY_POD)))
        assert before, "the policy in force mutates a latency-sensitive pod"
        volume.update({"policy.yaml": nested(100_000)})

        # A worker looks at the file when a review comes due; each counts its refusal (once per content).
        def reviewed_and_refused() -> bool:
            reply = server.post_review(pod_review(LATENCY_POD))
            assert reply.status == 200, reply.body[:300]
            assert decoded_patch(json.loads(reply.body)) == before
            assert server.request("GET", "/readyz").status == 200
            return metric_value(server.metrics(), "netqos_policy_file_rejected") >= 1

        until(reviewed_and_refused, "the refusal counted")
        deadline = time.monotonic() + 3  # more reviews and looks at the file after the refusal
        while time.monotonic() < deadline:
            reviewed_and_refused()
        metrics = server.metrics()
        assert metric_value(metrics, "netqos_policy_reloads_total", result="failure") >= 1
        logs = server.logs()
        assert "RecursionError" not in logs and "Traceback" not in logs
        assert f"nested more than {MAX_DEPTH} levels deep" in logs
