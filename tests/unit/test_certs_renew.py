"""`netqos-webhook certs --renew-before DAYS`: re-issue from the same CA when due, else touch nothing."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509

from webhook.certs import CertFiles, generate
from webhook.cli import main


def load(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def names(cert):
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [str(n.value) for n in san]


def snapshot(files: CertFiles) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (files.ca_cert, files.ca_key, files.cert, files.key)}


@pytest.fixture
def certs(tmp_path):
    return generate(tmp_path / "certs", hosts=["127.0.0.1"], days=60, ca_days=3650)


@pytest.mark.parametrize(
    "renew_before, renewed",
    [
        (30, False),  # 60 days left: more than 30
        (59, False),
        (61, True),  # 60 days left: within 61
        (365, True),
    ],
)
def test_the_server_certificate_is_reissued_only_when_it_expires_within_the_window(
    certs, capsys, renew_before, renewed
):
    before = snapshot(certs)
    assert main(["certs", "--out", str(certs.directory), "--renew-before", str(renew_before)]) == 0
    after = snapshot(certs)
    out = capsys.readouterr().out
    assert {k: after[k] for k in ("ca.crt", "ca.key")} == {k: before[k] for k in ("ca.crt", "ca.key")}, (
        "the CA must never change: the webhook's caBundle stays valid"
    )
    if not renewed:
        assert after == before and "left" in out and "alone" in out
        return
    assert after["tls.crt"] != before["tls.crt"] and after["tls.key"] != before["tls.key"]
    assert out.startswith("renewed")
    old, new = x509.load_pem_x509_certificate(before["tls.crt"]), load(certs.cert)
    new.verify_directly_issued_by(load(certs.ca_cert))
    assert names(new) == names(old), "the renewed certificate keeps every name"
    assert new.not_valid_after_utc > old.not_valid_after_utc + dt.timedelta(days=300)


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda f: f.cert.unlink(), "no readable"),
        (lambda f: f.key.write_bytes(generate(f.directory.parent / "other").key.read_bytes()), "is not the key of"),
        (lambda f: f.cert.write_bytes(generate(f.directory.parent / "other").cert.read_bytes()), "not issued by"),
    ],
    ids=["certificate missing", "key does not match", "certificate from another CA"],
)
def test_an_unusable_server_certificate_is_reissued_whatever_its_expiry(certs, capsys, damage, reason):
    damage(certs)
    assert main(["certs", "--out", str(certs.directory), "--renew-before", "1"]) == 0
    assert reason in capsys.readouterr().out
    load(certs.cert).verify_directly_issued_by(load(certs.ca_cert))


def test_a_new_host_is_added_by_renewing(certs, capsys):
    assert main(["certs", "--out", str(certs.directory), "--renew-before", "1", "--host", "webhook.example"]) == 0
    assert "webhook.example" in capsys.readouterr().out
    assert names(load(certs.cert))[-2:] == ["127.0.0.1", "webhook.example"]


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: None, "renewing needs the CA"),
        (lambda d: generate(d, days=10, ca_days=20), "itself expires"),
    ],
    ids=["no CA", "CA expiring within the window"],
)
def test_renewal_without_a_usable_ca_is_a_usage_error_that_says_what_to_do(tmp_path, capsys, setup, message):
    directory = tmp_path / "certs"
    setup(directory)
    assert main(["certs", "--out", str(directory), "--renew-before", "30"]) == 2
    err = capsys.readouterr().err
    assert message in err and f"netqos-webhook certs --out {directory}" in err
