"""A real `netqos-webhook serve` (gunicorn, TLS) with certificates from the project's
own generator (what `netqos-webhook certs` writes), verified as the API server verifies it, and
every patch it returns applied by both Python's and Go's JSON-patch."""

import json
import socket
import ssl
import warnings

import pytest

from harness.patches import apply_python, assert_patch_agrees, decoded_patch
from harness.server import SERVER_NAME, start_server
from tests.fixtures import expectations, fixture, with_netqos

pytestmark = pytest.mark.process
EXPECTED = expectations()


def test_server_certificate_verifies_against_the_ca_for_the_service_name(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        with server.client_context().wrap_socket(sock, server_hostname=SERVER_NAME) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            names = [v for k, v in tls.getpeercert()["subjectAltName"] if k == "DNS"]
            assert SERVER_NAME in names


def test_a_name_the_certificate_does_not_carry_is_refused(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        with pytest.raises(ssl.SSLCertVerificationError):
            server.client_context().wrap_socket(sock, server_hostname="evil.example.com")


def test_tls_below_1_2_is_refused(server):
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(str(server.certs.ca_cert))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # offering TLS 1.1 is the point here
        client.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        client.maximum_version = ssl.TLSVersion.TLSv1_1
    try:
        client.set_ciphers("ALL:@SECLEVEL=0")  # let this client offer TLS 1.1 at all
    except ssl.SSLError:
        pytest.skip("this OpenSSL cannot offer TLS 1.1")
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            client.wrap_socket(sock, server_hostname=SERVER_NAME)


def test_plain_http_to_the_tls_port_gets_no_service(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            reply = sock.recv(4096)
        except ConnectionResetError:
            reply = b""
    assert not reply.startswith(b"HTTP/"), reply[:100]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_reviews_over_https_get_patches_go_applies_identically(server, name, tmp_path):
    doc, want = fixture(name), EXPECTED[name]
    body = server.review(doc)
    answer = body["response"]
    assert body["apiVersion"] == doc["apiVersion"] and answer["uid"] == doc["request"]["uid"]
    assert answer["allowed"] is True
    before = doc["request"]["object"]
    ops = decoded_patch(body)
    if want["decision"] == "mutated":
        assert_patch_agrees(before, ops, with_netqos(before, want["injected"]), tmp_path)
        # The mutated pod sent again (as on a re-invocation) produces no change.
        doc["request"]["object"] = apply_python(before, ops)
        again = server.review(doc)
        assert "patch" not in again["response"]
    else:
        assert ops == []


def test_reviews_share_one_keep_alive_connection(server):
    conn = server.connect()
    try:
        for name in ("review-create-defaulted-pod.json", "review-create-unlabelled.json") * 3:
            assert server.review(fixture(name), conn)["response"]["allowed"] is True
    finally:
        conn.close()


VALID = json.dumps(fixture("review-create-defaulted-pod.json")).encode()
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    "case, method, path, body, headers, status",
    [
        ("not JSON", "POST", "/mutate", b"{not json", JSON, 400),
        ("JSON but not an AdmissionReview", "POST", "/mutate", b'{"kind": "Pod"}', JSON, 400),
        (
            "request is not an object",
            "POST",
            "/mutate",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
            JSON,
            400,
        ),
        (
            "no uid",
            "POST",
            "/mutate",
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}',
            JSON,
            400,
        ),
        ("invalid UTF-8", "POST", "/mutate", b'{"apiVersion": "\xff\xfe"}', JSON, 400),
        ("deeply nested", "POST", "/mutate", b"[" * 100_000 + b"]" * 100_000, JSON, 400),
        ("empty body", "POST", "/mutate", b"", JSON, 400),
        ("wrong content type", "POST", "/mutate", VALID, {"Content-Type": "text/plain"}, 415),
        ("wrong method", "GET", "/mutate", None, {}, 405),
        ("unknown path", "POST", "/validate", VALID, JSON, 404),
        ("oversized body", "POST", "/mutate", b" " * (8 * 1024 * 1024 + 1), JSON, 413),
    ],
)
def test_bad_requests_get_a_json_4xx_and_the_server_keeps_serving(server, case, method, path, body, headers, status):
    reply = server.request(method, path, body, headers)
    assert reply.status == status, f"{case}: {reply.body[:200]!r}"
    parsed = reply.json()
    assert isinstance(parsed, dict) and parsed.get("error"), f"{case}: no JSON error message in {reply.body[:200]!r}"
    assert server.review(fixture("review-create-defaulted-pod.json"))["response"]["allowed"] is True


def test_serve_without_certificates_generates_a_development_pair_and_says_so(tmp_path):
    with start_server(tmp_path, dev_certs=True) as srv:
        assert sorted(p.name for p in (tmp_path / "certs").iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
        assert srv.review(fixture("review-create-defaulted-pod.json"))["response"]["patchType"] == "JSONPatch"
        assert "generated a development CA and certificate" in srv.logs()


def test_health_and_readiness(server):
    assert server.request("GET", "/healthz")[0] == 200
    reply = server.request("GET", "/readyz")
    assert reply.status == 200 and reply.json()["status"] == "ready"
