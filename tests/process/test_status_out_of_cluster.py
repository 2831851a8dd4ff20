"""`netqos-webhook status` on what the README documents beside the in-cluster install: a webhook
registered out of the cluster (`register --url`), and a user whose RBAC hides the registration or
the pods. Against the fake API server on loopback (harness/kubeapi.py) through the real
client; the out-of-cluster webhook is a real TLS listener on loopback.

- an out-of-cluster registration has no Deployment, Service or Secret: none is a problem; the
  certificate its URL serves is checked against the entries' caBundle, as the API server checks it;
- what RBAC hides is "unknown", never "MISSING" or "none"; a run that could check nothing exits 1;
- PLACEMENT counts the Pending pods it can see; a terminating (evicted) pod is not counted.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import socket
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import kubeapi
from harness.kubeapi import TLS, Snapshot, issue_tls, node, pod
from tests.fixtures import NETQOS_TERMS, REPO
from webhook.commands.status import StatusArgs, run
from webhook.manifests import webhook_configuration
from webhook.policy_file import load_policy

NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
POLICY = str(REPO / "deploy/base/policy.yaml")
QOS = {"qos": "latency-sensitive", "app": "web"}


@contextmanager
def tls_listener(tls: TLS) -> Iterator[int]:
    """A TLS server on 127.0.0.1 presenting `tls`'s certificate (handshakes, then closes): the port."""
    with tempfile.TemporaryDirectory() as d:
        cert, key = Path(d, "tls.crt"), Path(d, "tls.key")
        cert.write_bytes(tls.cert)
        key.write_bytes(tls.key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (OSError, ssl.SSLError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def registered_at(url: str, ca: bytes) -> dict[str, Any]:
    """What `register --url URL` applies: the entries call the URL, trusting `ca`."""
    return webhook_configuration(load_policy(POLICY), url=url, ca_bundle=ca)


def status(
    objs: list[dict[str, Any]], tmp_path: Path, forbidden: frozenset[str] = frozenset()
) -> tuple[int, dict[str, Any], str]:
    """`status -o json` and the table, against the objects; (exit code, report, table)."""
    snapshot = Snapshot().add_all(objs)
    snapshot.forbidden |= set(forbidden)
    with kubeapi.serve(snapshot, tmp_path) as api:
        args = StatusArgs(kubeconfig=str(api.kubeconfig), output="json", config=POLICY)
        out = io.StringIO()
        code = run(args, out, now=NOW)
        table = io.StringIO()
        assert run(StatusArgs(kubeconfig=str(api.kubeconfig), config=POLICY), table, now=NOW) == code
    return code, json.loads(out.getvalue()), table.getvalue()


CLUSTER = [
    kubeapi.namespace("shop"),
    node("fast-1", "high"),
    node("slow-1", "low"),
    pod("shop", "web-a", QOS, "fast-1", ("ReplicaSet", "web-1"), preferred=NETQOS_TERMS),
]


def test_an_out_of_cluster_registration_is_checked_at_its_url_not_for_a_deployment(tmp_path: Path) -> None:
    tls = issue_tls(["localhost"])
    with tls_listener(tls) as port:
        url = f"https://localhost:{port}/mutate"
        code, report, table = status([registered_at(url, tls.ca_cert), *CLUSTER], tmp_path)
    assert report["problems"] == [], report["problems"]
    assert report["webhook"]["urls"] == [url]
    assert report["webhook"]["certificate"]["verifies_against_ca_bundle"] is True
    assert (report["webhook"]["deployment"], report["webhook"]["ready_endpoints"]) == (None, None)
    assert f"  url               {url}" in table and "ready endpoints" not in table
    assert code == 0


def test_an_out_of_cluster_webhook_serving_another_cas_certificate_is_a_problem(tmp_path: Path) -> None:
    served, trusted = issue_tls(["localhost"]), issue_tls(["localhost"])
    with tls_listener(served) as port:
        url = f"https://localhost:{port}/mutate"
        code, report, _ = status([registered_at(url, trusted.ca_cert), *CLUSTER], tmp_path)
    assert report["problems"] == [
        "the serving certificate does not verify for localhost against webhook entry netqos.netqos.io: no "
        "certificate in its caBundle signed it (a stale caBundle, or a new CA)"
    ]
    assert report["webhook"]["certificate"]["verifies_against_ca_bundle"] is False
    assert code == 3


def test_an_out_of_cluster_webhook_that_is_not_running_is_a_problem(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    url = f"https://127.0.0.1:{port}/mutate"  # nothing listens there now
    code, report, _ = status([registered_at(url, issue_tls(["127.0.0.1"]).ca_cert), *CLUSTER], tmp_path)
    [problem] = report["problems"]
    assert problem.startswith(f"the webhook at {url} could not be reached to check its certificate: ")
    assert code == 3


def test_what_rbac_hides_is_unknown_never_missing_and_checking_nothing_exits_1(tmp_path: Path) -> None:
    hidden = {"mutatingwebhookconfigurations", "mutatingadmissionpolicies", "mutatingadmissionpolicybindings", "pods"}
    code, report, table = status(CLUSTER, tmp_path, forbidden=frozenset(hidden))
    assert report["installation"] == "unknown"
    assert report["webhook"]["configuration"] is None
    assert set(report["pods"].values()) == {None}
    assert "MISSING" not in table and "none" not in table.split("PROBLEMS")[0]
    assert "  configuration     unknown (cannot read it)" in table
    assert "PODS      unknown (cannot read the pods)" in table
    assert table.rstrip().endswith("RESULT nothing could be checked (forbidden by RBAC): exit 1")
    assert code == 1


def test_placement_counts_the_pending_pods_it_sees_without_nodes_and_no_terminating_pod(tmp_path: Path) -> None:
    terminating = pod("shop", "web-gone", QOS, "slow-1", ("ReplicaSet", "web-1"), preferred=NETQOS_TERMS)
    terminating["metadata"]["deletionTimestamp"] = "2026-05-31T23:59:00Z"  # evicted, shutting down
    pending = pod("shop", "web-new", QOS, None, ("ReplicaSet", "web-1"), preferred=NETQOS_TERMS)
    tls = issue_tls(["localhost"])
    with tls_listener(tls) as port:
        objs = [registered_at(f"https://localhost:{port}/mutate", tls.ca_cert), *CLUSTER, terminating, pending]
        code, report, table = status(objs, tmp_path, forbidden=frozenset({"nodes"}))
    assert report["pods"]["selected"] == 2  # web-a and the pending pod; not the terminating one
    assert report["placement"]["pending"] == 1
    assert report["placement"]["high"] is None  # the nodes could not be read
    assert "PLACEMENT unknown (cannot read the nodes), pending 1" in table
    assert code == 0
