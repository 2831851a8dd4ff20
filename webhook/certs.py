"""Certificates for serving the webhook: a private CA and a server certificate it signs.

The API server verifies the webhook against `caBundle` (our `ca.crt`) with the Service DNS name
(`NAME.NS.svc`) as the TLS server name, so the server certificate carries every name a client may
use: `NAME`, `NAME.NS`, `NAME.NS.svc`, `NAME.NS.svc.cluster.local`, plus extra hosts (DNS names or
IP addresses) for out-of-cluster use. ECDSA P-256 by default: smaller and a faster handshake than
RSA. Files are written atomically (write, then rename) so a running server never reads half a key.

Every CA made here lasts `DEFAULT_CA_DAYS` (10 years) and each server certificate
`DEFAULT_CERT_DAYS` (1 year), whichever command made the directory, so `renew` re-issues server
certificates under the same CA, and the caBundle stays, for years. A server certificate never
outlives its CA: one that would is refused (`CertificateRequestError`), never cut short silently.
Replacing the CA is a rollover (`generate(keep_previous_ca=True)`): `ca-bundle.crt` holds the new
CA and the previous one, for the caBundle while the servers switch (docs/install.md, "Renewing certificates").

Client certificates (`issue_client`) are for `serve --client-ca`: `NAME.crt`/`NAME.key` beside
the CA that signs them, extended key usage clientAuth only, so a server certificate of ours is
never accepted as a client nor a client certificate as a server.

Inspecting certificates is here too, for `register`, `status` and `certs` alike: the names a
certificate carries (`san_names`), whether a CA issued it (`issued_by`), whether a key is its key
(`key_matches`), how long it has left (`days_left`), and why the API server would refuse it
(`refusal`). The names given for new certificates are checked with apimachinery's rules
(`check_names`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.errors import UsageError
from webhook.names import DEFAULT_CA_DAYS, DEFAULT_CERT_DAYS, DEFAULT_NAMESPACE, DEFAULT_SERVICE, KEY_TYPES
from webhook.validation import is_dns1035_label, is_dns1123_label, is_dns1123_subdomain_caseless

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
_CLOCK_SKEW = dt.timedelta(minutes=5)  # accept clients whose clock runs a little behind


class _File:
    """A `CertFiles` attribute: the path of one file name in its directory."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, files: CertFiles, owner: type | None = None) -> Path:
        return files.directory / self.name


@dataclass(frozen=True)
class CertFiles:
    """The four files `netqos-webhook certs` writes into one directory (and the rollover bundle)."""

    directory: Path

    ca_cert = _File("ca.crt")
    ca_key = _File("ca.key")
    cert = _File("tls.crt")
    key = _File("tls.key")
    # The new and the previous CA after a rollover; absent otherwise (the caBundle is ca.crt).
    ca_bundle = _File("ca-bundle.crt")

    def has_ca(self) -> bool:
        return self.ca_cert.exists() or self.ca_key.exists()


class CertificateRequestError(UsageError, ValueError):
    """What was asked for cannot make a usable certificate (a name the API server would never
    dial, a CA that expires first); the message says which and what to give instead."""


def check_names(service: str, namespace: str, hosts: Iterable[str] = ()) -> None:
    """The Service name (a DNS-1035 label, as the API server validates Service names), the
    namespace (a DNS-1123 label) and each extra host (an IP address, or a DNS name, `*.` for a
    wildcard): what else would go into a certificate no client can use."""
    problems = []
    for flag, value, errors in (
        ("--service", service, is_dns1035_label(service)),
        ("--namespace", namespace, is_dns1123_label(namespace)),
    ):
        if errors:
            problems.append(f"{flag} {value!r} is not a valid name: {'; '.join(errors)}")
    for host in hosts:
        errors = _host_errors(host)
        if errors:
            problems.append(f"--host {host!r} is neither an IP address nor a DNS name: {'; '.join(errors)}")
    if problems:
        raise CertificateRequestError(" and ".join(problems))


def _host_errors(host: str) -> list[str]:
    try:
        ipaddress.ip_address(host)
        return []
    except ValueError:
        pass
    name = host.removeprefix("*.")  # a wildcard covers one label; the rest is a DNS name
    if not host.isascii():
        return ["only ASCII letters, digits, '-' and '.' (write an internationalized name in its xn-- form)"]
    return is_dns1123_subdomain_caseless(name)


def service_names(service: str, namespace: str) -> list[str]:
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def generate(
    out: Path,
    service: str = DEFAULT_SERVICE,
    namespace: str = DEFAULT_NAMESPACE,
    hosts: Iterable[str] = (),
    days: int = DEFAULT_CERT_DAYS,
    key_type: str = "ecdsa",
    ca_days: int = DEFAULT_CA_DAYS,
    keep_previous_ca: bool = False,
    now: dt.datetime | None = None,
) -> CertFiles:
    """Write a new CA and a server certificate for the Service (and `hosts`) into `out`, replacing
    whatever is there; a stale `ca-bundle.crt` (of another CA) goes too.

    `keep_previous_ca` is the rollover: the CA that was in `out`, while still valid at `now`, stays
    in `ca-bundle.crt` beside the new one. Published as the caBundle, that bundle verifies the
    servers still on the old certificate and those already on the new. A rollover that finds
    `ca-bundle.crt` (one not yet finished: the cluster may still trust only an older CA of it)
    keeps every CA of that bundle still valid too, so a second rollover never drops the CA the
    cluster trusts; finishing a rollover is deleting `ca-bundle.crt` (docs/install.md, "Renewing
    certificates")."""
    files = CertFiles(Path(out))
    if ca_days <= days:
        raise CertificateRequestError(
            f"a CA of {ca_days} days cannot sign a server certificate of {days} days: the CA must outlive "
            f"it, so that it can be renewed under the same CA; give --ca-days more than --days (default "
            f"{DEFAULT_CA_DAYS} and {DEFAULT_CERT_DAYS})"
        )
    previous = _previous_cas(files, now or dt.datetime.now(dt.UTC)) if keep_previous_ca else []
    ca_key = _new_key(key_type)
    # A CA that outlives its server certificate lets `renew` re-issue the latter with the same
    # caBundle; one that expires with it would have to be replaced (and the caBundle with it).
    ca_cert = _ca_certificate(ca_key, ca_days)
    key = _new_key(key_type)
    names = service_names(service, namespace)
    names += [h for h in hosts if h not in names]
    cert = _server_certificate(key, names, ca_cert, ca_key, days)
    files.directory.mkdir(parents=True, exist_ok=True)  # only once everything is made: nothing half-written
    _write(files.ca_key, _key_pem(ca_key), 0o600)
    _write(files.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    _write(files.key, _key_pem(key), 0o600)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    if not previous:
        files.ca_bundle.unlink(missing_ok=True)
    else:
        bundle = files.ca_cert.read_bytes() + b"".join(ca.public_bytes(serialization.Encoding.PEM) for ca in previous)
        _write(files.ca_bundle, bundle, 0o644)
    return files


def _previous_cas(files: CertFiles, now: dt.datetime) -> list[x509.Certificate]:
    """The CAs a rollover keeps trusting: the one in `ca.crt`, then those of an unfinished
    rollover's `ca-bundle.crt`, each once and while valid at `now`. A bundle that cannot be read
    is refused, never dropped: it may hold the only CA the cluster trusts."""
    found: list[x509.Certificate] = []
    try:
        found.append(x509.load_pem_x509_certificate(files.ca_cert.read_bytes()))
    except (OSError, ValueError):
        pass
    if files.ca_bundle.exists():
        try:
            found += x509.load_pem_x509_certificates(files.ca_bundle.read_bytes())
        except (OSError, ValueError) as err:
            raise CertificateRequestError(
                f"{files.ca_bundle} (an unfinished CA rollover) holds no readable PEM certificate "
                f"({getattr(err, 'strerror', None) or err}), so the CAs the cluster may still trust cannot be kept; "
                f"fix or restore it, or delete it if its rollover is finished (every server serves a certificate "
                f"of {files.ca_cert}), then run --new-ca again"
            ) from None
    kept: list[x509.Certificate] = []
    for ca in found:
        if ca.not_valid_after_utc > now and ca not in kept:
            kept.append(ca)
    return kept


@dataclass(frozen=True)
class Renewal:
    """What `renew` did: `renewed` is False when the server certificate was left alone."""

    renewed: bool
    reason: str
    not_after: dt.datetime  # of the server certificate now in `tls.crt`
    names: tuple[str, ...]


class RenewError(UsageError, ValueError):
    """The directory holds no usable CA to renew from; the message says what to do."""


def renew(
    out: Path,
    renew_before_days: int,
    days: int = DEFAULT_CERT_DAYS,
    hosts: Iterable[str] = (),
    key_type: str = "ecdsa",
    now: dt.datetime | None = None,
) -> Renewal:
    """Re-issue `tls.crt`/`tls.key` from the CA in `out` if the certificate expires within
    `renew_before_days` (or is missing, not from that CA, not matching its key, or lacks one of
    `hosts`); otherwise leave every file alone. The CA is never changed, so the caBundle stays."""
    files = CertFiles(Path(out))
    now = now or dt.datetime.now(dt.UTC)
    ca_cert, ca_key = _load_ca(files)
    if ca_cert.not_valid_after_utc <= now + dt.timedelta(days=renew_before_days):
        raise RenewError(
            f"the CA {files.ca_cert} itself expires {ca_cert.not_valid_after_utc:%Y-%m-%d}, within "
            f"{renew_before_days} days: replace it with 'netqos-webhook certs --out {files.directory} --new-ca' "
            "and follow the CA rollover in docs/install.md (Renewing certificates)"
        )
    if ca_cert.not_valid_after_utc < now + dt.timedelta(days=days):
        raise RenewError(
            f"the CA {files.ca_cert} expires {ca_cert.not_valid_after_utc:%Y-%m-%d}, before a server certificate of "
            f"{days} days would: give fewer --days, or roll the CA over with 'netqos-webhook certs --out "
            f"{files.directory} --new-ca' and follow docs/install.md (Renewing certificates)"
        )
    current, problem = _current_server_cert(files, ca_cert)
    names = san_names(current) if current is not None else []
    wanted = list(hosts)
    missing = [h for h in wanted if h not in names]
    if current is not None and problem is None and not missing:
        expires = current.not_valid_after_utc
        if expires > now + dt.timedelta(days=renew_before_days):
            return Renewal(
                False,
                f"valid until {expires:%Y-%m-%d %H:%M}Z, more than {renew_before_days} days away",
                expires,
                tuple(names),
            )
        problem = f"expires {expires:%Y-%m-%d %H:%M}Z, within {renew_before_days} days"
    elif missing:
        problem = problem or f"lacks the name(s) {', '.join(missing)}"
    if not names:
        names = service_names(DEFAULT_SERVICE, DEFAULT_NAMESPACE)
    names += [h for h in missing if h not in names]
    key = _new_key(key_type)
    cert = _server_certificate(key, names, ca_cert, ca_key, days)
    # Key first, then certificate: a server that looks in between sees a pair that does not match,
    # refuses it and keeps its current certificate until the certificate lands too.
    _write(files.key, _key_pem(key), 0o600)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Renewal(True, problem or "no server certificate", cert.not_valid_after_utc, tuple(names))


# File names a client certificate may not take: the CA's, the server pair's, the rollover bundle's.
RESERVED_CLIENT_NAMES = ("ca", "tls", "ca-bundle")


@dataclass(frozen=True)
class ClientCertificate:
    cert: Path
    key: Path
    ca_made: bool  # the directory held no CA: a new one, for clients only, signed it
    not_after: dt.datetime


def check_client_name(name: str) -> None:
    """NAME becomes the certificate's common name (the user name the server's log shows) and the
    files NAME.crt and NAME.key: a DNS-1123 subdomain (letters, digits, '-', '.'), none of ours."""
    errors = is_dns1123_subdomain_caseless(name) if name.isascii() else ["only ASCII letters, digits, '-' and '.'"]
    if name in RESERVED_CLIENT_NAMES:
        errors = [f"{name}.crt and {name}.key are the {'CA' if name != 'tls' else 'server'}'s files"]
    if errors:
        raise CertificateRequestError(f"--client {name!r} cannot name a client certificate: {'; '.join(errors)}")


def issue_client(
    out: Path,
    name: str,
    days: int = DEFAULT_CERT_DAYS,
    key_type: str = "ecdsa",
    ca_days: int = DEFAULT_CA_DAYS,
) -> ClientCertificate:
    """Write `NAME.crt` and `NAME.key` (0600) into `out`: a client certificate (common name NAME,
    extended key usage clientAuth) signed by the CA in `out`, which `serve --client-ca out/ca.crt`
    accepts. A directory without any CA file gets a new CA first (`ca.crt`, `ca.key`): a CA for
    clients only, as docs/operations.md advises, since `--client-ca` accepts whatever it signed.
    An existing CA is never replaced; half a CA, or a key that is not its key, is refused with
    what to do (`_load_ca`). A client certificate there already of that name is re-issued."""
    check_client_name(name)
    files = CertFiles(Path(out))
    made = not files.has_ca()
    if made:
        if ca_days <= days:
            raise CertificateRequestError(
                f"a CA of {ca_days} days cannot sign a client certificate of {days} days; give --ca-days more "
                "than --days"
            )
        ca_key: Any = _new_key(key_type)
        ca_cert = _ca_certificate(ca_key, ca_days)
    elif files.ca_cert.exists() != files.ca_key.exists():
        found, missing = (files.ca_cert, files.ca_key) if files.ca_cert.exists() else (files.ca_key, files.ca_cert)
        raise CertificateRequestError(
            f"{files.directory} holds {found.name} without {missing.name}: a client certificate is signed with the "
            f"CA's key; copy {missing.name} there, or give another --out for a new CA of its own"
        )
    else:
        ca_cert, ca_key = _load_ca(files)
    key = _new_key(key_type)
    cert = _leaf_certificate(key, name, ca_cert, ca_key, days, ExtendedKeyUsageOID.CLIENT_AUTH)
    files.directory.mkdir(parents=True, exist_ok=True)
    if made:
        _write(files.ca_key, _key_pem(ca_key), 0o600)
        _write(files.ca_cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    paths = files.directory / f"{name}.crt", files.directory / f"{name}.key"
    _write(paths[1], _key_pem(key), 0o600)
    _write(paths[0], cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return ClientCertificate(paths[0], paths[1], made, cert.not_valid_after_utc)


def _load_ca(files: CertFiles) -> tuple[x509.Certificate, Any]:
    try:
        ca_cert = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    except OSError as err:
        raise RenewError(f"cannot read {err.filename} ({err.strerror}): {_without_ca(files)}") from None
    except (ValueError, TypeError) as err:
        raise RenewError(
            f"{files.ca_cert} or {files.ca_key} is not a PEM certificate and unencrypted key: {err}"
        ) from None
    if not key_matches(ca_cert, ca_key):
        raise RenewError(f"{files.ca_key} is not the key of {files.ca_cert}")
    return ca_cert, ca_key


def _without_ca(files: CertFiles) -> str:
    """What to do when the CA to renew from is not all there."""
    if files.ca_cert.exists() and not files.ca_key.exists():
        return (
            f"renewing signs with the CA's key, and {files.directory} holds {files.ca_cert.name} without "
            f"{files.ca_key.name}; copy the key there if you have it, else replace the CA with 'netqos-webhook certs "
            f"--out {files.directory} --new-ca' (a rollover: ca-bundle.crt keeps the old CA trusted meanwhile)"
        )
    if files.has_ca():
        return (
            f"renewing needs both {files.ca_cert.name} and {files.ca_key.name}; replace the CA with "
            f"'netqos-webhook certs --out {files.directory} --new-ca'"
        )
    return (
        "renewing needs the CA that signed the current certificate; create one with "
        f"'netqos-webhook certs --out {files.directory}'"
    )


def _current_server_cert(files: CertFiles, ca_cert: x509.Certificate) -> tuple[x509.Certificate | None, str | None]:
    """The certificate in tls.crt and what is wrong with it (None: usable)."""
    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    except OSError:
        return None, f"no readable {files.cert}"
    except ValueError:
        return None, f"{files.cert} is not a PEM certificate"
    if not issued_by(cert, ca_cert):
        return cert, f"not issued by {files.ca_cert}"
    try:
        key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return cert, f"no usable key in {files.key}"
    if not key_matches(cert, key):
        return cert, f"{files.key} is not the key of {files.cert}"
    return cert, None


# --- inspecting certificates ---------------------------------------------------------------------


def san_names(cert: x509.Certificate) -> list[str]:
    """The names a certificate is valid for: its subjectAltName's DNS names, then IP addresses."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [*san.get_values_for_type(x509.DNSName), *(str(ip) for ip in san.get_values_for_type(x509.IPAddress))]


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Did `ca` sign `cert` (its issuer name and signature)?"""
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def key_matches(cert: x509.Certificate, key: Any) -> bool:
    """Is `key` (a private key) the key of `cert`?"""
    return _spki(key.public_key()) == _spki(cert.public_key())


def days_left(cert: x509.Certificate, now: dt.datetime) -> int:
    """Whole days until `cert` expires (negative once it has)."""
    return (cert.not_valid_after_utc - now).days


def fingerprint(cert: x509.Certificate) -> str:
    """The SHA-256 of the certificate (DER), as `openssl x509 -noout -fingerprint -sha256` prints
    it: how a person compares a CA found in a cluster with the ca.crt they hold."""
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


def rollover_hint(directory: Path) -> str:
    """How to replace a CA that a caBundle may trust without breaking the webhook: a rollover,
    whose ca-bundle.crt keeps the old CA trusted while the servers switch. `serve` and `register`
    both end their refusal to replace a CA they find with it."""
    return (
        f"'netqos-webhook certs --out {directory} --new-ca' (a rollover: {CertFiles(directory).ca_bundle.name} keeps "
        "the old CA trusted)"
    )


def first_certificate(pem: bytes | None) -> x509.Certificate | None:
    """The first certificate of a PEM bundle; None when there is none."""
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificates(pem)[0]
    except ValueError:
        return None


def refusal(cert: x509.Certificate, bundle: bytes, server_name: str, now: dt.datetime) -> str | None:
    """Why the API server, trusting the CAs in `bundle` (a caBundle), would refuse `cert` when it
    dials `server_name`; None when it would accept it."""
    try:
        cas = x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return "its caBundle holds no PEM certificate"
    if not any(issued_by(cert, ca) for ca in cas):
        return "no certificate in its caBundle signed it (a stale caBundle, or a new CA)"
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        return "the certificate is not valid now"
    names = san_names(cert)
    if not names:
        return f"it has no subjectAltName (needs {server_name})"
    if server_name not in names:
        return f"its subjectAltName does not name {server_name}"
    return None


def _new_key(key_type: str) -> PrivateKey:
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"key type {key_type!r} is not supported; use one of {', '.join(KEY_TYPES)}")


def _validity(days: int) -> tuple[dt.datetime, dt.datetime]:
    if days < 1:
        raise ValueError(f"--days must be at least 1, got {days}")
    now = dt.datetime.now(dt.UTC)
    return now - _CLOCK_SKEW, now + dt.timedelta(days=days)


def _spki(public_key: Any) -> bytes:
    """A public key's canonical encoding: equal for the key of a certificate and its private key."""
    encoded: bytes = public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return encoded


def _ca_certificate(key: PrivateKey, days: int) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netqos-webhook CA")])
    not_before, not_after = _validity(days)
    return (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            _key_usage(key_cert_sign=True, crl_sign=True),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )


def _key_usage(key_encipherment: bool = False, key_cert_sign: bool = False, crl_sign: bool = False) -> x509.KeyUsage:
    """Digital signature, and what else a certificate of ours may do (x509.KeyUsage names all nine)."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=key_encipherment,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=key_cert_sign,
        crl_sign=crl_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _server_certificate(
    key: PrivateKey, names: list[str], ca_cert: x509.Certificate, ca_key: Any, days: int
) -> x509.Certificate:
    # Clients match the SANs; the CN is for people reading the certificate: NAME.NS.svc.
    return _leaf_certificate(key, names[2], ca_cert, ca_key, days, ExtendedKeyUsageOID.SERVER_AUTH, names)


def _leaf_certificate(
    key: PrivateKey,
    common_name: str,
    ca_cert: x509.Certificate,
    ca_key: Any,
    days: int,
    usage: x509.ObjectIdentifier,
    names: list[str] | None = None,
) -> x509.Certificate:
    """A certificate `ca_cert` signs for one `usage` (serverAuth or clientAuth), with `names` as
    its subjectAltName when given; never outliving its CA."""
    not_before, not_after = _validity(days)
    if not_after > ca_cert.not_valid_after_utc:  # the callers refuse this first, with a message for people
        raise CertificateRequestError(
            f"the certificate of {common_name} would outlive its CA (valid until "
            f"{ca_cert.not_valid_after_utc:%Y-%m-%d}); give fewer --days"
        )
    ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), critical=False)
    return (
        builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(key_encipherment=isinstance(key, rsa.RSAPrivateKey)), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(ca_key, hashes.SHA256())
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.fchmod(fd, mode)  # O_CREAT's mode is masked by the umask; keys must be 0600 regardless
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
