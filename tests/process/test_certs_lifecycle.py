"""Certificates over their life: a 10-year CA from every command that makes one, renewals under
it from any of their directories, and a CA that is only replaced on purpose."""

from __future__ import annotations

import base64
import datetime as dt
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from webhook.certs import CertFiles

CA_DAYS = 3650
CERT_DAYS = 365


def netqos(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "", "KUBECONFIG": "/nonexistent/kubeconfig"},
    )


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def lifetime_days(cert: x509.Certificate) -> int:
    return (cert.not_valid_after_utc - cert.not_valid_before_utc).days


def made_by_serve(tmp: Path) -> Path:
    """serve's development pair: made in ./certs before the listening address is checked (taken here)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = netqos("serve", "--bind", f"127.0.0.1:{taken.getsockname()[1]}", "--log-format", "text", cwd=tmp)
    assert done.returncode == 1 and "cannot listen" in done.stderr, done.stderr
    return tmp / "certs"


def made_by_register(tmp: Path) -> Path:
    """register's pair: generated into --certs before it looks for a cluster (there is none here)."""
    done = netqos("register", "--certs", str(tmp / "reg"), cwd=tmp)
    assert "generated a CA and a server certificate" in done.stderr, done.stderr
    return tmp / "reg"


def made_by_certs(tmp: Path) -> Path:
    done = netqos("certs", "--out", str(tmp / "out"))
    assert done.returncode == 0, done.stderr
    return tmp / "out"


MAKERS = {"serve": made_by_serve, "register": made_by_register, "certs": made_by_certs}


@pytest.mark.parametrize("command", MAKERS)
def test_every_command_makes_a_ten_year_ca_and_a_one_year_server_certificate(tmp_path, command):
    files = CertFiles(MAKERS[command](tmp_path))
    assert lifetime_days(load(files.ca_cert)) == CA_DAYS
    assert lifetime_days(load(files.cert)) == CERT_DAYS


@pytest.mark.parametrize("command", MAKERS)
def test_renew_before_reissues_under_the_same_ca_in_the_directory_of_every_command(tmp_path, command):
    files = CertFiles(MAKERS[command](tmp_path))
    ca_before, cert_before = files.ca_cert.read_bytes(), load(files.cert)
    done = netqos("certs", "--out", str(files.directory), "--renew-before", str(CERT_DAYS + 1))
    assert done.returncode == 0 and done.stdout.startswith(f"renewed {files.cert}"), done.stderr
    renewed = load(files.cert)
    assert files.ca_cert.read_bytes() == ca_before, "the caBundle stays valid"
    assert renewed.serial_number != cert_before.serial_number
    renewed.verify_directly_issued_by(load(files.ca_cert))
    assert lifetime_days(renewed) == CERT_DAYS


@pytest.fixture
def existing(tmp_path) -> CertFiles:
    return CertFiles(made_by_certs(tmp_path))


def snapshot(files: CertFiles) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in files.directory.iterdir()}


def test_certs_refuses_to_replace_an_existing_ca_and_says_what_to_run(existing):
    before = snapshot(existing)
    done = netqos("certs", "--out", str(existing.directory))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert f"netqos-webhook certs --out {existing.directory} --renew-before 30" in done.stderr
    assert "--new-ca" in done.stderr and "--force" in done.stderr
    assert snapshot(existing) == before, "nothing is written"


def test_force_replaces_the_ca_and_trusts_only_the_new_one(existing):
    old_ca = existing.ca_cert.read_bytes()
    done = netqos("certs", "--out", str(existing.directory), "--force")
    assert done.returncode == 0, done.stderr
    assert existing.ca_cert.read_bytes() != old_ca and not existing.ca_bundle.exists()


def test_new_ca_keeps_the_previous_ca_in_the_bundle_beside_the_new_one(existing):
    old_ca = load(existing.ca_cert)
    done = netqos("certs", "--out", str(existing.directory), "--new-ca")
    assert done.returncode == 0, done.stderr
    new_ca = load(existing.ca_cert)
    assert new_ca != old_ca
    assert x509.load_pem_x509_certificates(existing.ca_bundle.read_bytes()) == [new_ca, old_ca]
    load(existing.cert).verify_directly_issued_by(new_ca)
    assert str(existing.ca_bundle) in done.stdout


def test_register_publishes_the_bundle_as_ca_bundle_before_the_secret_during_a_rollover(existing):
    assert netqos("certs", "--out", str(existing.directory), "--new-ca").returncode == 0
    done = netqos("register", "--certs", str(existing.directory), "--dry-run")
    assert done.returncode == 0, done.stderr
    config, secret = list(yaml.safe_load_all(done.stdout))
    assert (config["kind"], secret["kind"]) == ("MutatingWebhookConfiguration", "Secret")
    bundles = {base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"]}
    assert bundles == {existing.ca_bundle.read_bytes()}
    assert base64.b64decode(secret["data"]["ca.crt"]) == existing.ca_cert.read_bytes()


def test_a_bundle_without_the_signing_ca_is_refused(existing, tmp_path):
    other = CertFiles(made_by_certs(tmp_path / "other"))
    existing.ca_bundle.write_bytes(other.ca_cert.read_bytes())
    done = netqos("register", "--certs", str(existing.directory), "--dry-run")
    assert done.returncode == 2 and "does not hold the CA in" in done.stderr and "Traceback" not in done.stderr


def test_a_ca_due_within_the_window_points_at_the_rollover(tmp_path):
    from webhook.certs import generate

    files = generate(tmp_path / "short", days=10, ca_days=20)
    done = netqos("certs", "--out", str(files.directory), "--renew-before", "30")
    assert done.returncode == 2 and f"netqos-webhook certs --out {files.directory} --new-ca" in done.stderr
    assert dt.datetime.now(dt.UTC) < load(files.ca_cert).not_valid_after_utc
