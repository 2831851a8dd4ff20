"""`netqos-webhook certs`: a CA and a server certificate the API server would accept."""

import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from tests.fixtures import REPO
from webhook.certs import generate


def load(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("certs"), "hook", "ops", hosts=["127.0.0.1", "::1", "dev.example.test"], days=30
    )


def test_the_ca_is_a_ca_that_signs_certificates(files):
    ca = load(files.ca_cert)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert constraints.critical and constraints.value.ca is True
    assert usage.key_cert_sign and usage.crl_sign


def test_the_server_certificate_is_for_server_auth_only(files):
    cert = load(files.cert)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]


def test_the_server_certificate_names_the_service_and_each_host(files):
    sans = load(files.cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "hook",
        "hook.ops",
        "hook.ops.svc",
        "hook.ops.svc.cluster.local",
        "dev.example.test",
    ]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]


@pytest.mark.parametrize("name", ["hook.ops.svc", "hook.ops.svc.cluster.local", "dev.example.test"])
def test_the_chain_verifies_for_each_dns_name(files, name):
    verifier = PolicyBuilder().store(Store([load(files.ca_cert)])).build_server_verifier(x509.DNSName(name))
    chain = verifier.verify(load(files.cert), [])
    assert chain[-1] == load(files.ca_cert)


def test_the_chain_does_not_verify_for_another_name(files):
    verifier = PolicyBuilder().store(Store([load(files.ca_cert)])).build_server_verifier(x509.DNSName("other.ops.svc"))
    with pytest.raises(VerificationError):
        verifier.verify(load(files.cert), [])


def test_private_keys_are_readable_by_the_owner_only(files):
    for key in (files.key, files.ca_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600


@pytest.mark.parametrize("key_type, kind", [("ecdsa", ec.EllipticCurvePublicKey), ("rsa", rsa.RSAPublicKey)])
def test_key_types(tmp_path, key_type, kind):
    cert = load(generate(tmp_path, key_type=key_type).cert)
    assert isinstance(cert.public_key(), kind)
    if key_type == "ecdsa":
        assert cert.public_key().curve.name == "secp256r1"


def test_validity_is_the_requested_number_of_days(files):
    cert = load(files.cert)
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert days == 30  # 30 days plus the 5 minutes of clock-skew allowance


def test_certificates_are_inspected_in_one_place():
    """Names, issuer and key pair are read by webhook.certs alone (san_names, issued_by,
    key_matches, refusal), for register, status and certs; the test harness only builds."""
    package = REPO / "webhook"
    inspections = ("verify_directly_issued_by", "get_extension_for_class", "SubjectPublicKeyInfo", "DNSName")
    found = sorted(
        f"{path.relative_to(package)}: {word}"
        for path in package.rglob("*.py")
        if path.name != "certs.py" and "testing" not in path.parts
        for word in inspections
        if word in path.read_text()
    )
    assert found == []
