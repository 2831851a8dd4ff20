"""Policy reload: a changed file is swapped in whole; an invalid one is refused; reviews never mix."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml

from harness.clock import ManualClock
from harness.patches import decoded_patch, pod_review
from harness.pods import pod
from harness.procfs import client_ports
from harness.server import metric_value, start_server
from harness.volume import MountedVolume
from harness.waiting import until
from webhook.affinity import PREFERRED
from webhook.policy_file import policy_from_bytes
from webhook.serving import filewatch
from webhook.serving.reload import LastGood, PolicySnapshot, PolicyWatcher, load_snapshot

LATENCY_POD = pod({"qos": "latency-sensitive"}, containers=[{"name": "c", "image": "i"}])


def policy_document(tag: str, net: str, zone: str, weights: tuple[int, int, int]) -> dict:
    """Two rules selecting the same pods, so a review mixing two policies would show it."""
    return {
        "apiVersion": "netqos.io/v1alpha1",
        "kind": "NetQoSPolicy",
        "rules": [
            {
                "name": "alpha",
                "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
                "preferences": [
                    {"weight": weights[0], "matchExpressions": [{"key": "net", "operator": "In", "values": [net]}]},
                    {
                        "weight": weights[1],
                        "matchExpressions": [{"key": "net", "operator": "NotIn", "values": [f"low-{tag}"]}],
                    },
                ],
            },
            {
                "name": "beta",
                "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
                "preferences": [
                    {"weight": weights[2], "matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]},
                ],
            },
        ],
    }


POLICY_A = policy_document("a", "high", "zone-a", (90, 10, 5))
POLICY_B = policy_document("b", "fast", "zone-b", (80, 20, 7))
INVALID = b"rules:\n- name: Not_A_DNS_Label\n  podSelector: {}\n  preferences: []\n"


def as_bytes(document: dict) -> bytes:
    return yaml.safe_dump(document, sort_keys=False).encode()


SHA_A = hashlib.sha256(as_bytes(POLICY_A)).hexdigest()
SHA_B = hashlib.sha256(as_bytes(POLICY_B)).hexdigest()


def load_snapshot_of(document: dict) -> PolicySnapshot:
    return PolicySnapshot(
        policy_from_bytes(as_bytes(document), "policy.yaml"),
        "policy.yaml",
        hashlib.sha256(as_bytes(document)).hexdigest(),
        0.0,
    )


def injected_terms(document: dict) -> list[dict]:
    """What a policy appends to a pod, written from the document (not by the code under test)."""
    return [
        {"weight": p["weight"], "preference": {"matchExpressions": p["matchExpressions"]}}
        for rule in document["rules"]
        for p in rule["preferences"]
    ]


def terms_of(patch: list[dict]) -> list[dict]:
    (op,) = [o for o in patch if o["path"] == "/spec/affinity"]
    return op["value"]["nodeAffinity"][PREFERRED]


@pytest.fixture
def volume(tmp_path):
    return MountedVolume(tmp_path / "config", {"policy.yaml": as_bytes(POLICY_A)})


@pytest.fixture
def watcher(volume):
    clock = ManualClock(1000.0)
    path = volume.path("policy.yaml")
    return PolicyWatcher(load_snapshot(path), path, interval=1.0, clock=clock), clock


def test_a_configmap_update_is_swapped_in_at_the_next_check(volume, watcher):
    w, clock = watcher
    first = w.current()
    volume.update({"policy.yaml": as_bytes(POLICY_B)})
    assert w.current() is first, "checked before the interval passed"
    clock.now += 1.0
    second = w.current()
    assert second is not first
    assert second.sha256 == hashlib.sha256(as_bytes(POLICY_B)).hexdigest()
    assert [t.to_api() for r in second.policy.rules for t in r.preferences] == injected_terms(POLICY_B)
    assert first.policy.rules[0].preferences[0].to_api() == injected_terms(POLICY_A)[0], "the old snapshot changed"


def test_the_file_is_looked_at_at_most_once_per_interval(volume, watcher, monkeypatch):
    w, clock = watcher
    stats = []
    real = filewatch.signature
    monkeypatch.setattr(filewatch, "signature", lambda paths: stats.append(paths) or real(paths))
    for _ in range(1000):
        w.current()
    assert stats == []
    clock.now += 1.0
    for _ in range(1000):
        w.current()
    assert len(stats) == 1


def test_an_invalid_file_is_refused_logged_once_and_counted_and_the_old_policy_stays(volume, watcher, caplog):
    from webhook.serving.metrics import _metrics

    w, clock = watcher
    old = w.current()
    failures = _metrics().policy_reloads.labels("failure")._value.get()
    volume.update({"policy.yaml": INVALID})
    with caplog.at_level(logging.ERROR, logger="webhook.serving.reload"):
        for _ in range(3):
            clock.now += 1.0
            assert w.current() is old
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, "the same refused file must be reported once, not every second"
    message = errors[0].getMessage()
    assert str(volume.path("policy.yaml")) in message and "Not_A_DNS_Label" in message and old.version in message
    assert _metrics().policy_reloads.labels("failure")._value.get() == failures + 1
    assert _metrics().policy_rejected._value.get() == 1

    volume.update({"policy.yaml": as_bytes(POLICY_B)})
    clock.now += 1.0
    assert w.current().sha256 == hashlib.sha256(as_bytes(POLICY_B)).hexdigest()
    assert _metrics().policy_rejected._value.get() == 0


INEXPRESSIBLE = (
    b"schedulerWeights: {nodeAffinity: 1, netqos: 2}\n"
    b"rules:\n- name: netqos\n  podSelector: {matchLabels: {qos: latency-sensitive}}\n"
    b"  nodeScore: {key: net, scores: [{value: high, score: 100}], unlistedScore: 0}\n"
)


def test_a_score_table_the_weights_cannot_express_is_refused_naming_the_field_and_the_old_policy_stays(
    volume, watcher, caplog
):
    w, clock = watcher
    old = w.current()
    volume.update({"policy.yaml": INEXPRESSIBLE})
    with caplog.at_level(logging.ERROR, logger="webhook.serving.reload"):
        clock.now += 1.0
        assert w.current() is old
    [error] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "schedulerWeights.nodeAffinity" in error and "at least 2" in error


def test_a_vanished_file_keeps_the_policy_in_force(tmp_path, caplog):
    path = tmp_path / "policy.yaml"
    path.write_bytes(as_bytes(POLICY_A))
    clock = ManualClock(1000.0)
    w = PolicyWatcher(load_snapshot(path), path, clock=clock)
    old = w.current()
    path.unlink()
    with caplog.at_level(logging.ERROR, logger="webhook.serving.reload"):
        for _ in range(3):
            clock.now += 1.0
            assert w.current() is old
    assert len([r for r in caplog.records if "cannot read" in r.getMessage()]) == 1


def workers_sharing(tmp_path, path, count: int) -> tuple[list[PolicyWatcher], ManualClock]:
    """`count` watchers as the workers of one server: the master's snapshot, one shared directory
    (each worker its own copy of the LastGood object, as after a fork)."""
    clock = ManualClock(1000.0)
    (tmp_path / "shared").mkdir()
    initial = load_snapshot(path)
    return [
        PolicyWatcher(initial, path, clock=clock, last_good=LastGood(tmp_path / "shared", clock=clock))
        for _ in range(count)
    ], clock


UNUSABLE = {
    "deleted": lambda volume: volume.path("policy.yaml").unlink(),
    "replaced by an invalid file": lambda volume: volume.update({"policy.yaml": INVALID}),
}


@pytest.mark.parametrize("unusable", UNUSABLE, ids=list(UNUSABLE))
def test_workers_keep_one_last_good_policy_when_the_file_becomes_unusable(tmp_path, volume, unusable):
    """One worker took B before the file went; the other never saw B. Both serve B after, and so
    does a worker started later (forked from the master, which still holds A)."""
    (first, second), clock = workers_sharing(tmp_path, volume.path("policy.yaml"), 2)
    volume.update({"policy.yaml": as_bytes(POLICY_B)})
    clock.now += 1.0
    assert first.current().sha256 == SHA_B  # only the first worker served a review in between
    UNUSABLE[unusable](volume)
    clock.now += 1.0
    assert first.current().sha256 == SHA_B
    assert second.current().sha256 == SHA_B
    shared = LastGood(tmp_path / "shared", clock=clock)
    restarted = PolicyWatcher(load_snapshot_of(POLICY_A), volume.path("policy.yaml"), clock=clock, last_good=shared)
    clock.now += 1.0
    assert restarted.current().sha256 == SHA_B


def test_a_valid_file_is_followed_whatever_another_worker_shared(tmp_path, volume):
    (first, second), clock = workers_sharing(tmp_path, volume.path("policy.yaml"), 2)
    volume.update({"policy.yaml": as_bytes(POLICY_B)})
    clock.now += 1.0
    assert first.current().sha256 == SHA_B
    volume.update({"policy.yaml": as_bytes(POLICY_A)})
    clock.now += 1.0
    assert second.current().sha256 == SHA_A, "the file in force wins over what a worker loaded before"
    assert first.current().sha256 == SHA_A


def test_the_same_content_relinked_is_not_a_reload(volume, watcher):
    w, clock = watcher
    old = w.current()
    volume.update({"policy.yaml": as_bytes(POLICY_A)})
    clock.now += 1.0
    assert w.current() is old


# --- under load, through the real server -----------------------------------------------------------


@pytest.mark.process
def test_under_load_every_review_sees_one_whole_policy_and_an_invalid_file_changes_nothing(tmp_path, volume):
    expected = {"A": injected_terms(POLICY_A), "B": injected_terms(POLICY_B)}
    seen = {"A": 0, "B": 0}
    failures: list[str] = []
    stop = threading.Event()
    with start_server(tmp_path, "--config", str(volume.path("policy.yaml")), workers=2) as server:

        def client(index: int) -> None:
            conn, sent = server.connect(), 0
            deadline = time.monotonic() + 30  # bounded even if the main thread fails to stop us
            while not stop.is_set() and time.monotonic() < deadline:
                if sent % 20 == 0:  # new connections now and then, so both workers take part
                    conn.close()
                    conn = server.connect()
                try:
                    terms = terms_of(
                        decoded_patch(server.review(pod_review(LATENCY_POD, uid=f"{index}-{sent}"), conn=conn))
                    )
                except Exception as err:  # every failure is the test's finding
                    failures.append(repr(err))
                    conn = server.connect()
                else:
                    match = [name for name, want in expected.items() if terms == want]
                    if match:
                        seen[match[0]] += 1
                    else:
                        failures.append(f"a mix of policies: {json.dumps(terms)}")
                sent += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()

        def answered() -> int:
            return seen["A"] + seen["B"] + len(failures)

        def serving_only(sha: str) -> bool:
            exposition = server.metrics()  # netqos_policy_info: 1 for a policy some live worker serves
            served = {other: metric_value(exposition, "netqos_policy_info", sha256=other) for other in (SHA_A, SHA_B)}
            return served == {SHA_A: 0, SHA_B: 0, sha: 1}

        try:
            until(lambda: answered() >= 20, "reviews under load")
            # The versions come 0.6 s apart: quicker than a worker's 1 s check, so some are skipped
            # (the schedule is the input, not a wait). Then every worker serves the last valid one
            # before the invalid file lands. (A worker that skipped a valid version and then met an
            # invalid file takes the version another worker loaded: docs/operations.md, "Policy reload".)
            for document in (POLICY_B, INVALID, POLICY_A, INVALID, POLICY_B, POLICY_A, POLICY_B):
                time.sleep(0.6)
                volume.update({"policy.yaml": document if isinstance(document, bytes) else as_bytes(document)})
            until(lambda: serving_only(SHA_B), "every worker serving policy B")
            refused = metric_value(server.metrics(), "netqos_policy_reloads_total", result="failure")
            volume.update({"policy.yaml": INVALID})
            until(
                lambda: metric_value(server.metrics(), "netqos_policy_reloads_total", result="failure") >= refused + 2,
                "both workers refusing the last (invalid) file",
            )
            counts_at_end, answered_at_end = dict(seen), answered()
            until(lambda: answered() >= answered_at_end + 100, "100 more reviews after the invalid file")
        finally:
            stop.set()
            for t in threads:
                t.join(35)
        assert failures == []
        assert seen["A"] > 0 and seen["B"] > 0
        assert seen["A"] == counts_at_end["A"], "policy A was still served after B was loaded for good"

        ready = [json.loads(server.request("GET", "/readyz", conn=server.connect())[1]) for _ in range(6)]
        assert {r["policy"]["sha256"] for r in ready} == {hashlib.sha256(as_bytes(POLICY_B)).hexdigest()}
        exposition = server.metrics()
        assert (
            metric_value(exposition, "netqos_policy_reloads_total", result="failure") >= 2
        )  # the last file, in each worker
        # At least one worker loaded B from the file; the other may have loaded it too, or taken it
        # from the server's shared last good policy while the file was invalid (not a reload of its own).
        assert metric_value(exposition, "netqos_policy_reloads_total", result="success") >= 1
        assert metric_value(exposition, "netqos_policy_file_rejected") == 1
        refusals = [r for r in server.log_records() if r["level"] == "ERROR" and "refused" in r["message"]]
        assert refusals and all("Not_A_DNS_Label" in r["message"] for r in refusals)


@pytest.mark.process
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="needs Linux /proc")
def test_after_a_reload_and_the_files_deletion_every_worker_serves_the_last_good_policy(tmp_path, volume):
    """One worker loads B while the other is held still (SIGSTOP: it cannot look at the file); the
    file is deleted; the other worker, let go, must serve B, not the A it started with."""
    with start_server(tmp_path, "--config", str(volume.path("policy.yaml")), workers=2) as server:
        kept = server.connect()  # one keep-alive connection: one worker

        def version(conn) -> str:
            return json.loads(server.request("GET", "/readyz", conn=conn).body)["policy"]["sha256"]

        assert version(kept) == SHA_A
        port = kept.sock.getsockname()[1]
        (loader,) = [w for w in server.workers() if port in client_ports(w)]
        (other,) = [w for w in server.workers() if w != loader]
        os.kill(other, signal.SIGSTOP)
        try:
            volume.update({"policy.yaml": as_bytes(POLICY_B)})
            until(lambda: version(kept) == SHA_B, "the worker loading the changed file", timeout=15, interval=0.1)
            volume.path("policy.yaml").unlink()
        finally:
            os.kill(other, signal.SIGCONT)

        def took_last_good() -> bool:
            return any(
                r.get("process") == other and "the last valid version a worker" in r["message"]
                for r in server.log_records()
            )

        deadline = time.monotonic() + 15
        while not took_last_good():  # its next look at the file, from a request it serves
            assert time.monotonic() < deadline, f"worker {other} did not take the last good policy"
            version(None)  # a new connection: either worker
        assert {version(None) for _ in range(12)} == {SHA_B}
        exposition = server.metrics()
        assert metric_value(exposition, "netqos_policy_info", sha256=SHA_A) == 0
        assert metric_value(exposition, "netqos_policy_info", sha256=SHA_B) == 1
