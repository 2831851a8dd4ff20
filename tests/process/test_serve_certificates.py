"""`serve` without --certfile/--keyfile uses certs/ and never replaces a CA or a certificate it
finds there: a CA without a server pair gets a pair issued under it; half a pair or half a CA is
refused (exit 2) naming the file found and the one missing. Through the real CLI and a real
gunicorn over TLS."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

from harness.certs import make_certs
from harness.server import LOOPBACK, free_port, start_server
from tests.fixtures import fixture
from webhook.certs import CertFiles, issued_by

ALL = ("ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt")


def _digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def _certs_holding(workdir: Path, names: tuple[str, ...]) -> Path:
    """workdir/certs holding exactly `names` of a full set the project's generator made."""
    certs = workdir / "certs"
    make_certs(certs)
    (certs / "ca-bundle.crt").write_bytes((certs / "ca.crt").read_bytes())
    for name in ALL:
        if name not in names:
            (certs / name).unlink()
    return certs


def test_a_ca_without_a_server_pair_gets_the_pair_issued_under_it_and_the_ca_is_kept(tmp_path):
    certs = _certs_holding(tmp_path, ("ca.crt", "ca.key"))
    before = _digests(certs)
    with start_server(tmp_path, dev_certs=True) as srv:
        assert {k: v for k, v in _digests(certs).items() if k.startswith("ca")} == before
        ca = x509.load_pem_x509_certificate((certs / "ca.crt").read_bytes())
        assert issued_by(x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes()), ca)
        # the client trusts only the CA that was there before the server started
        assert srv.review(fixture("review-create-defaulted-pod.json"))["response"]["allowed"] is True
        assert "under the CA found there" in srv.logs()


# files left in certs/, the file the message names as found, the one it names as missing
REFUSED = [
    (("tls.crt",), "tls.crt", "tls.key"),
    (("tls.key",), "tls.key", "tls.crt"),
    (("ca.crt", "ca.key", "tls.crt"), "tls.crt", "tls.key"),
    (("ca.crt", "ca.key", "tls.key"), "tls.key", "tls.crt"),
    (("ca.crt",), "ca.crt", "ca.key"),
    (("ca.key",), "ca.key", "ca.crt"),
    (("ca.crt", "ca-bundle.crt"), "ca.crt", "ca.key"),
    (("ca-bundle.crt",), "ca-bundle.crt", "ca.crt"),
]


@pytest.mark.parametrize(("left", "found", "missing"), REFUSED, ids=["+".join(r[0]) for r in REFUSED])
def test_half_a_pair_or_half_a_ca_is_refused_naming_what_is_there_and_what_is_not(tmp_path, left, found, missing):
    certs = _certs_holding(tmp_path, left)
    before = _digests(certs)
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--bind", f"{LOOPBACK}:{free_port()}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"holds {found} without {missing}" in lines[0]
    for name in left:  # never called absent when it is there
        assert f"no {name}" not in lines[0] and f"without {name}" not in lines[0]
    assert _digests(certs) == before


def test_every_command_the_refusal_suggests_for_a_ca_without_its_key_works_as_printed(tmp_path):
    certs = _certs_holding(tmp_path, ("ca.crt",))
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "serve", "--bind", f"{LOOPBACK}:{free_port()}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    command = done.stderr.split("'netqos-webhook ", 1)[1].split("'", 1)[0]
    made = subprocess.run(
        [sys.executable, "-m", "webhook", *command.split()], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert made.returncode == 0, made.stderr
    assert CertFiles(certs).ca_bundle.exists()  # the rollover keeps the CA that was there trusted
