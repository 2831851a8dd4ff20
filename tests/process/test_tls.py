"""TLS: 1.2 minimum, no plain HTTP, client certificates (--client-ca), rotation without a failed request."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest
from cryptography import x509

from harness.certs import make_certs
from harness.patches import pod_review
from harness.server import metric_value, start_server
from harness.volume import MountedVolume
from harness.waiting import until
from webhook.certs import CertFiles, issue_client
from webhook.serving.tls import CertificateRotator, TLSFiles, check_files

pytestmark = pytest.mark.process
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}}, "spec": {}}


def serial_of(pem_file: Path) -> int:
    return x509.load_pem_x509_certificate(Path(pem_file).read_bytes()).serial_number


def peer_serial(sock: ssl.SSLSocket) -> int:
    return x509.load_der_x509_certificate(sock.getpeercert(binary_form=True)).serial_number


def client_pair(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A CA of its own and a client certificate it signs (clientAuth), as `certs --client` makes
    them for the API server: the CA, the certificate, the key."""
    made = issue_client(directory / name, "kube-apiserver")
    return CertFiles(directory / name).ca_cert, made.cert, made.key


# --- protocol --------------------------------------------------------------------------------------


def handshake(server, ciphers: str | None = None, **settings) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(str(server.certs.ca_cert))
    if ciphers:
        context.set_ciphers(ciphers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, value in settings.items():
            setattr(context, name, value)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.version()


@pytest.mark.parametrize(
    "highest, answer",
    [
        ("TLSv1_1", None),
        ("TLSv1_2", "TLSv1.2"),
        ("TLSv1_3", "TLSv1.3"),
    ],
    ids=["TLS 1.1 refused", "TLS 1.2 accepted", "TLS 1.3 accepted"],
)
def test_tls_1_2_is_the_minimum(server, highest, answer):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        settings = {"minimum_version": ssl.TLSVersion.TLSv1, "maximum_version": getattr(ssl.TLSVersion, highest)}
    if answer:
        assert handshake(server, **settings) == answer
    else:
        # SECLEVEL=0 lets this client offer TLS 1.1 at all, so the refusal is the server's alert.
        with pytest.raises(ssl.SSLError, match="PROTOCOL_VERSION|protocol version"):
            handshake(server, ciphers="DEFAULT:@SECLEVEL=0", **settings)


def test_plain_http_to_the_tls_port_gets_no_service(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        raw.sendall(
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        )
        received = b""
        try:
            while chunk := raw.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    assert b"HTTP/" not in received and b"AdmissionReview" not in received
    assert server.request("GET", "/healthz")[0] == 200, "the server must keep serving TLS clients"


# --- client certificates ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("mtls")
    trusted = client_pair(workdir / "clients", "trusted")
    stranger = client_pair(workdir / "clients", "stranger")
    with start_server(
        workdir, "--client-ca", str(trusted[0]), client_cert=(str(trusted[1]), str(trusted[2]))
    ) as running:
        yield running, trusted, stranger


@pytest.mark.parametrize(
    "who, answered",
    [
        ("no client certificate", False),
        ("a certificate from another CA", False),
        ("a certificate from the client CA", True),
    ],
)
def test_with_client_ca_only_clients_with_a_certificate_it_signed_are_served(mtls, who, answered):
    server, trusted, stranger = mtls
    cert = {
        "no client certificate": None,
        "a certificate from another CA": (str(stranger[1]), str(stranger[2])),
        "a certificate from the client CA": (str(trusted[1]), str(trusted[2])),
    }[who]
    context = ssl.create_default_context(cafile=str(server.certs.ca_cert))
    if cert:
        context.load_cert_chain(*cert)
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    try:
        conn.request("POST", "/mutate", body=json.dumps(pod_review(POD)), headers={"Content-Type": "application/json"})
        status = conn.getresponse().status
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
        status = None
    finally:
        conn.close()
    assert (status == 200) is answered, who


def test_serve_refuses_to_start_with_an_unreadable_client_ca(tmp_path):
    certs = make_certs(tmp_path / "certs")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "webhook",
            "serve",
            "--certfile",
            str(certs.cert),
            "--keyfile",
            str(certs.key),
            "--client-ca",
            str(tmp_path / "missing-ca.crt"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "missing-ca.crt" in done.stderr


# --- rotation --------------------------------------------------------------------------------------


def secret_files(certs: CertFiles) -> dict[str, bytes]:
    return {"tls.crt": certs.cert.read_bytes(), "tls.key": certs.key.read_bytes(), "ca.crt": certs.ca_cert.read_bytes()}


def test_a_half_rotated_pair_is_refused_and_the_complete_pair_taken(tmp_path, caplog):
    old = make_certs(tmp_path / "old")
    new = make_certs(tmp_path / "new")
    live = tmp_path / "live"
    live.mkdir()
    for name in ("tls.crt", "tls.key"):
        shutil.copy(old.directory / name, live / name)
    clock = [0.0]
    rotator = CertificateRotator(TLSFiles(live / "tls.crt", live / "tls.key"), interval=1.0, clock=lambda: clock[0])
    first = rotator.current
    shutil.copy(new.cert, live / "tls.crt")  # the certificate has landed, its key not yet
    clock[0] += 1
    with caplog.at_level(logging.ERROR, logger="webhook.serving.tls"):
        assert rotator.check() is False
    assert rotator.current is first, "a context without a matching key must never serve"
    assert "is not the key of" in caplog.text and "still serving the previous certificate" in caplog.text
    shutil.copy(new.key, live / "tls.key")
    clock[0] += 1
    assert rotator.check() is True and rotator.current is not first
    assert check_files(TLSFiles(live / "tls.crt", live / "tls.key")) is None


def test_certificate_rotation_under_load_fails_no_request(tmp_path):
    first = make_certs(tmp_path / "first")
    secret = MountedVolume(tmp_path / "secret", secret_files(first))
    mounted = CertFiles(secret.directory)
    failures: list[str] = []
    answered = [0]
    stop = threading.Event()
    with start_server(tmp_path, certs=mounted) as server:
        old_conn = server.connect()
        assert server.review(pod_review(POD), conn=old_conn)
        old_serial = serial_of(first.cert)
        assert peer_serial(old_conn.sock) == old_serial

        def client(index: int) -> None:
            sni = index % 2 == 0  # half as the API server (SNI = Service name), half by IP (no SNI)
            conn, sent = server.connect(service_name=sni), 0
            deadline = time.monotonic() + 30
            while not stop.is_set() and time.monotonic() < deadline:
                if sent % 5 == 0:  # many fresh handshakes, some of them during the swap
                    conn.close()
                    conn = server.connect(service_name=sni)
                try:
                    server.review(pod_review(POD, uid=f"{index}-{sent}"), conn=conn)
                    answered[0] += 1
                except Exception as err:  # every failure is the test's finding
                    failures.append(repr(err))
                    conn = server.connect(service_name=sni)
                sent += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        try:
            until(lambda: answered[0] >= 20, "reviews under load")
            # cert-manager's renewal: same CA, new key and certificate, one symlink swap.
            subprocess.run(
                [sys.executable, "-m", "webhook", "certs", "--out", str(first.directory), "--renew-before", "400"],
                check=True,
                capture_output=True,
                timeout=60,
            )
            assert serial_of(first.cert) != serial_of(tmp_path / "secret" / "..data" / "tls.crt")
            secret.update(secret_files(first))
            until(
                lambda: metric_value(server.metrics(), "netqos_tls_certificate_reloads_total", result="success") == 2,
                "both workers reloading the renewed certificate",
            )
            reloaded_at = answered[0]
            until(lambda: answered[0] >= max(reloaded_at + 20, 51), "20 more reviews on the renewed certificate")
        finally:
            stop.set()
            for t in threads:
                t.join(35)
        assert failures == [] and answered[0] > 50

        new_serial = serial_of(mounted.cert)
        for sni in (True, False, True, False):  # new connections, whichever worker takes them
            conn = server.connect(service_name=sni)
            server.review(pod_review(POD), conn=conn)
            assert peer_serial(conn.sock) == new_serial
        assert new_serial != old_serial
        assert server.review(pod_review(POD), conn=old_conn), "an open connection keeps working"
        assert peer_serial(old_conn.sock) == old_serial, "on the certificate it was handshaken with"
        exposition = server.metrics()
        assert metric_value(exposition, "netqos_tls_certificate_reloads_total", result="success") == 2  # per worker
        assert metric_value(exposition, "netqos_tls_certificate_reloads_total", result="failure") == 0
        expiry = x509.load_pem_x509_certificate(mounted.cert.read_bytes()).not_valid_after_utc.timestamp()
        assert metric_value(
            exposition, "netqos_certificate_expiry_timestamp_seconds", certificate="serving"
        ) == pytest.approx(expiry, abs=0.5)
        ca_expiry = x509.load_pem_x509_certificate(mounted.ca_cert.read_bytes()).not_valid_after_utc.timestamp()
        assert metric_value(
            exposition, "netqos_certificate_expiry_timestamp_seconds", certificate="ca"
        ) == pytest.approx(ca_expiry, abs=0.5)
