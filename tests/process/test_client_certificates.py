"""`certs --client NAME` makes the client certificate `serve --client-ca` asks for: the CLI writes
it, a real gunicorn over real TLS serves a client presenting it and refuses, at the handshake,
one presenting none, or presenting the server's own certificate (serverAuth only)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness.certs import LOCAL_HOSTS
from harness.patches import pod_review
from harness.server import Server, start_server
from webhook.certs import CertFiles, issued_by

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"qos": "latency-sensitive"}}}


def netqos(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", *args], capture_output=True, text=True, cwd=cwd, timeout=60)


@pytest.fixture(scope="module")
def project_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """As docs/operations.md says: the project's CA and server pair, then a client certificate
    under that CA, each by the CLI."""
    workdir = tmp_path_factory.mktemp("client-ca")
    hosts = [flag for host in LOCAL_HOSTS for flag in ("--host", host)]
    assert netqos("certs", "--out", "certs", *hosts, cwd=workdir).returncode == 0
    done = netqos("certs", "--out", "certs", "--client", "kube-apiserver", cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "certs/kube-apiserver.crt\ncerts/kube-apiserver.key\n"  # the CA is kept as it was
    return workdir / "certs"


@pytest.fixture(scope="module")
def mtls(project_ca: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    files = CertFiles(project_ca)
    client = (str(project_ca / "kube-apiserver.crt"), str(project_ca / "kube-apiserver.key"))
    with start_server(
        tmp_path_factory.mktemp("server"), "--client-ca", str(files.ca_cert), certs=files, client_cert=client
    ) as running:
        yield running


def test_the_client_certificate_is_for_client_authentication_under_the_projects_ca(project_ca: Path) -> None:
    cert = x509.load_pem_x509_certificate((project_ca / "kube-apiserver.crt").read_bytes())
    ca = x509.load_pem_x509_certificate((project_ca / "ca.crt").read_bytes())
    assert issued_by(cert, ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kube-apiserver"
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert stat.S_IMODE(os.stat(project_ca / "kube-apiserver.key").st_mode) == 0o600


def exchange(server: Server, client: tuple[str, str] | None, tls13: bool) -> int:
    """POST /mutate presenting `client` (or no certificate): the status, or ssl.SSLError."""
    context = ssl.create_default_context(cafile=str(server.certs.ca_cert))
    context.maximum_version = ssl.TLSVersion.TLSv1_3 if tls13 else ssl.TLSVersion.TLSv1_2
    if client:
        context.load_cert_chain(*client)
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)
    try:
        conn.request("POST", "/mutate", body=json.dumps(pod_review(POD)), headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("tls13", [False, True], ids=["TLS 1.2", "TLS 1.3"])
def test_a_client_with_the_certificate_is_served(mtls: Server, project_ca: Path, tls13: bool) -> None:
    client = (str(project_ca / "kube-apiserver.crt"), str(project_ca / "kube-apiserver.key"))
    assert exchange(mtls, client, tls13) == 200


@pytest.mark.parametrize(
    "who, alert",
    [
        ("no certificate", "CERTIFICATE_REQUIRED|HANDSHAKE_FAILURE"),
        ("the server's certificate (serverAuth only)", "UNSUPPORTED_CERTIFICATE|CERTIFICATE"),
    ],
)
@pytest.mark.parametrize("tls13", [False, True], ids=["TLS 1.2", "TLS 1.3"])
def test_a_client_without_it_is_refused_at_the_handshake(
    mtls: Server, project_ca: Path, who: str, alert: str, tls13: bool
) -> None:
    client = None if who == "no certificate" else (str(project_ca / "tls.crt"), str(project_ca / "tls.key"))
    context = ssl.create_default_context(cafile=str(mtls.certs.ca_cert))
    context.maximum_version = ssl.TLSVersion.TLSv1_3 if tls13 else ssl.TLSVersion.TLSv1_2
    if client:
        context.load_cert_chain(*client)
    with socket.create_connection(("127.0.0.1", mtls.port), timeout=10) as raw:
        with pytest.raises(ssl.SSLError, match=alert):
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                # TLS 1.3: the client's part of the handshake ends before the server has checked
                # its certificate; the server's alert ends the handshake at the first read. Nothing
                # is sent first: a request the server never reads would make its close a reset
                # that can reach the client before the alert does.
                tls.recv(1)
    assert mtls.request("GET", "/healthz")[0] == 200, "the server keeps serving clients with the certificate"


def test_a_directory_without_a_ca_gets_one_for_clients_only_and_half_a_ca_is_refused(tmp_path: Path) -> None:
    done = netqos("certs", "--out", "clients", "--client", "kube-apiserver", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        f"clients/{n}" for n in ("ca.crt", "ca.key", "kube-apiserver.crt", "kube-apiserver.key")
    ]
    assert not (tmp_path / "clients/tls.crt").exists()
    (tmp_path / "clients/ca.key").unlink()
    done = netqos("certs", "--out", "clients", "--client", "other", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "netqos-webhook certs: clients holds ca.crt without ca.key: a client certificate is signed with the CA's "
        "key; copy ca.key there, or give another --out for a new CA of its own\n"
    )


@pytest.mark.parametrize("name", ["tls", "ca", "../up", "a b"])
def test_a_client_name_that_is_not_a_file_name_of_its_own_is_refused(tmp_path: Path, name: str) -> None:
    done = netqos("certs", "--out", "certs", "--client", name, cwd=tmp_path)
    assert done.returncode == 2 and f"--client {name!r} cannot name a client certificate" in done.stderr
    assert not (tmp_path / "certs").exists()
