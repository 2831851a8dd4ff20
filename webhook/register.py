"""`netqos-webhook register`: what it puts into a cluster, built and checked without one.

Pure: `check_certificates` (the files the API server and the pods will use agree with each other
and with the name the API server connects to), `objects` (the TLS Secret and the
MutatingWebhookConfiguration, as plain dicts, the latter from `webhook.manifests`), and the two
checks against what the cluster holds already, given as the API server's JSON:
- `check_ca_kept`: register never replaces a CA it does not hold. The CAs of the cluster's TLS
  Secret (ca.crt) and of the registration's caBundle must each share one with what register
  would write, as during a rollover (ca-bundle.crt holds the new CA and the one trusted now);
  otherwise the webhook's pods and the API server would disagree until every pod restarts.
- `check_policy_agrees`: the policy register registers rules for is the one the webhook serves;
  a --config that differs from it names the rules that differ.
Sending them is `webhook.cluster.apply` (server-side apply); the CLI wires the two, so this module
needs no cluster, no kubernetes client, and is tested without either.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from webhook.certs import (
    CertFiles,
    days_left,
    fingerprint,
    first_certificate,
    issued_by,
    key_matches,
    rollover_hint,
    san_names,
)
from webhook.errors import UsageError
from webhook.manifests import webhook_configuration
from webhook.names import CONFIGURATION_NAME, DEFAULT_SERVICE, LABELS, RENEWAL_DAYS, TLS_SECRET
from webhook.policy import Policy
from webhook.policy_review import validating_configuration


class CertificateError(UsageError):
    """The certificate files cannot be used; the message names the file and how to make new ones."""


# --- certificates ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Certificates:
    """The PEM files register sends: the server's certificate and key, the CA that signed it, and
    the caBundle: that CA, or during a CA rollover the new and the previous CA (ca-bundle.crt);
    and what to warn about (a certificate that expires soon)."""

    ca_cert: bytes
    cert: bytes
    key: bytes
    ca_bundle: bytes
    warnings: tuple[str, ...] = ()


def server_name(namespace: str, url: str | None) -> str:
    """The name the API server checks the webhook's certificate against."""
    if url is not None:
        return urlsplit(url).hostname or ""
    return f"{DEFAULT_SERVICE}.{namespace}.svc"


def check_certificates(
    files: CertFiles, namespace: str, url: str | None = None, now: dt.datetime | None = None
) -> Certificates:
    """Read ca.crt, tls.crt and tls.key from `files` and check they will work for the webhook.

    Raises `CertificateError` naming the file and what to do when a file is missing or
    unreadable, the key does not belong to the certificate, the CA did not sign it, it has
    expired, or it does not carry the name the API server will connect to. What the server
    certificate lacks is fixed by renewing it under the same CA (the caBundle stays); only a CA
    that cannot sign any more is replaced.
    """
    now = now or dt.datetime.now(dt.UTC)
    name = server_name(namespace, url)
    renew, remake = _renew_hint(files, name), _remake_hint(files, namespace, url)
    can_renew = _signing_ca(files, now) is not None
    fix = renew if can_renew else remake
    paths = (files.ca_cert, files.cert, files.key)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise CertificateError(f"missing {', '.join(missing)}; {remake if not files.ca_cert.exists() else fix}")
    data = {}
    for path in paths:
        try:
            data[path] = path.read_bytes()
        except OSError as err:
            raise CertificateError(f"cannot read {path}: {err.strerror}") from None

    ca = first_certificate(data[files.ca_cert])
    if ca is None:
        raise CertificateError(f"{files.ca_cert} is not a PEM certificate; {remake}")
    cert = first_certificate(data[files.cert])
    if cert is None:
        raise CertificateError(f"{files.cert} is not a PEM certificate; {fix}")
    try:
        key = serialization.load_pem_private_key(data[files.key], password=None)
    except (ValueError, TypeError):
        raise CertificateError(f"{files.key} is not an unencrypted PEM private key; {fix}") from None

    if not key_matches(cert, key):
        raise CertificateError(f"{files.key} is not the key of {files.cert}; {fix}")
    if not issued_by(cert, ca):
        raise CertificateError(
            f"{files.cert} was not issued by the CA in {files.ca_cert} (the signature does not verify); the API "
            f"server would reject it; {fix}"
        )
    if ca.not_valid_after_utc <= now:
        raise CertificateError(f"{files.ca_cert} expired on {ca.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; {remake}")
    if cert.not_valid_after_utc <= now:
        raise CertificateError(f"{files.cert} expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; {fix}")
    if name not in san_names(cert):
        names = ", ".join(san_names(cert)) or "none"
        raise CertificateError(
            f"{files.cert} does not name {name}, the host the API server connects to (its names: {names}); {fix}"
        )
    bundle = _ca_bundle(files, ca) if files.ca_bundle.exists() else data[files.ca_cert]
    return Certificates(
        ca_cert=data[files.ca_cert],
        cert=data[files.cert],
        key=data[files.key],
        ca_bundle=bundle,
        warnings=tuple(_expiring(files, ca, cert, now, renew)),
    )


def _expiring(files: CertFiles, ca: Any, cert: Any, now: dt.datetime, renew: str) -> list[str]:
    """Warnings for a certificate with fewer than RENEWAL_DAYS left: it works today, not for long."""
    warnings = []
    left = days_left(cert, now)
    if left < RENEWAL_DAYS:
        warnings.append(
            f"{files.cert} expires on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC ({left} days left); {renew}"
        )
    left = days_left(ca, now)
    if left < RENEWAL_DAYS:
        warnings.append(
            f"the CA {files.ca_cert} expires on {ca.not_valid_after_utc:%Y-%m-%d %H:%M} UTC ({left} days left); "
            f"roll it over: 'netqos-webhook certs --out {files.directory} --new-ca' "
            "(docs/install.md, Renewing certificates)"
        )
    return warnings


def _signing_ca(files: CertFiles, now: dt.datetime) -> Any:
    """The CA certificate in `files` when it can still sign a renewal (its key is there and is
    its key, it has not expired); None otherwise."""
    try:
        ca = first_certificate(files.ca_cert.read_bytes())
        ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if ca is None or not key_matches(ca, ca_key) or ca.not_valid_after_utc <= now:
        return None
    return ca


def _ca_bundle(files: CertFiles, ca: Any) -> bytes:
    """ca-bundle.crt, checked to trust the CA that signed the certificate the pods will serve."""
    try:
        data = files.ca_bundle.read_bytes()
        trusted = x509.load_pem_x509_certificates(data)
    except OSError as err:
        raise CertificateError(f"cannot read {files.ca_bundle}: {err.strerror}") from None
    except ValueError:
        raise CertificateError(
            f"{files.ca_bundle} holds no PEM certificate; remove it to use {files.ca_cert} alone as the caBundle"
        ) from None
    if ca not in trusted:
        raise CertificateError(
            f"{files.ca_bundle} does not hold the CA in {files.ca_cert}, which signed the server certificate: the "
            f"API server would reject the webhook; remove it to use {files.ca_cert} alone as the caBundle"
        )
    return data


def _renew_hint(files: CertFiles, name: str) -> str:
    """Re-issue the server certificate under the CA that is there: the caBundle stays valid."""
    command = f"netqos-webhook certs --out {files.directory} --renew-before {RENEWAL_DAYS} --host {name}"
    return f"renew it under the same CA, so the caBundle stays: '{command}'"


def _remake_hint(files: CertFiles, namespace: str, url: str | None) -> str:
    """A new CA and certificate, for when no usable CA is there to renew from."""
    command = f"netqos-webhook certs --out {files.directory} --namespace {namespace}"
    if url is not None:
        command += f" --host {urlsplit(url).hostname}"
    # `certs` keeps what it finds (a CA, or a pair made elsewhere) unless told: these are being replaced anyway
    if files.has_ca() or files.cert.exists() or files.key.exists():
        command += " --force"
    return f"make new ones with '{command}'"


def tls_secret(certs: Certificates, namespace: str) -> dict[str, Any]:
    """The Secret the Deployment mounts at /tls: a kubernetes.io/tls Secret plus the CA."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": TLS_SECRET, "namespace": namespace, "labels": dict(LABELS)},
        "type": "kubernetes.io/tls",
        "data": {
            "ca.crt": _b64(certs.ca_cert),
            "tls.crt": _b64(certs.cert),
            "tls.key": _b64(certs.key),
        },
    }


def objects(policy: Policy, certs: Certificates, namespace: str, url: str | None = None) -> list[dict[str, Any]]:
    """What register applies, in order. With `url` the webhook is served outside the cluster, so
    no Secret is needed: only the webhook configuration pointing at `url`.

    Normally the Secret comes first (the namespace must exist; the configuration is useless
    without it). During a CA rollover (a caBundle beyond ca.crt) the configuration comes first:
    the API server then trusts the new CA before any pod can read the new certificate. Beside the
    configuration, with the same caBundle, the ValidatingWebhookConfiguration by which the webhook
    checks its own policy ConfigMap (`webhook.policy_review`; in-cluster only: it calls the Service)."""
    config = webhook_configuration(policy, namespace=namespace, url=url, ca_bundle=certs.ca_bundle)
    if url is not None:
        return [config]
    secret = tls_secret(certs, namespace)
    validating = validating_configuration(namespace, ca_bundle=certs.ca_bundle)
    return [config, validating, secret] if certs.ca_bundle != certs.ca_cert else [secret, config, validating]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --- what the cluster holds already ------------------------------------------------------------


class CAReplaced(UsageError):
    """Registering would replace a CA the cluster trusts or serves by, which register does not hold."""


class PolicyDisagrees(UsageError):
    """--config is not the policy the installed webhook serves; the message names the rules."""


@dataclass(frozen=True)
class HeldCAs:
    """The CAs one object in the cluster holds (PEM, as the API server sent it), and where."""

    where: str
    cas: tuple[x509.Certificate, ...]


def cluster_cas(
    secret: Mapping[str, Any] | None, configuration: Mapping[str, Any] | None, namespace: str
) -> list[HeldCAs]:
    """The CAs of the TLS Secret's ca.crt (what the webhook's pods serve under) and of the
    registration's caBundles (what the API server trusts), each object that holds any."""
    found = []
    if secret is not None:
        data = secret.get("data") or {}
        cas = _pem_certificates(_decoded(data.get("ca.crt")))
        if cas:
            found.append(HeldCAs(f"Secret {namespace}/{TLS_SECRET} (its ca.crt)", cas))
    if configuration is not None:
        bundles = [
            _decoded((w.get("clientConfig") or {}).get("caBundle"))
            for w in configuration.get("webhooks") or ()
            if isinstance(w, dict)
        ]
        cas = tuple(dict.fromkeys(ca for bundle in bundles for ca in _pem_certificates(bundle)))
        if cas:
            found.append(HeldCAs(f"MutatingWebhookConfiguration {CONFIGURATION_NAME} (its caBundle)", cas))
    return found


def check_ca_kept(found: Sequence[HeldCAs], held: bytes | None, directory: Path) -> None:
    """Raise `CAReplaced` when an object of `found` holds only CAs that `held` (the PEM bundle
    register would write: ca-bundle.crt, else ca.crt; None when `directory` holds no CA) does not:
    writing ours would replace a CA the cluster uses. Sharing one CA is enough (a rollover keeps
    the old CA beside the new; finishing it drops the old one)."""
    ours = set(_pem_certificates(held or b""))
    for place in found:
        if ours.intersection(place.cas):
            continue
        shown = ", ".join(f"SHA-256 {fingerprint(ca)}" for ca in place.cas)
        holds = f"holds no CA ({CertFiles(directory).ca_cert.name})" if held is None else "does not hold it"
        raise CAReplaced(
            f"{place.where} holds the CA {shown}, and {directory}/ {holds}: registering would replace it, and the "
            "API server would reject the webhook's certificate until every pod serves the new one; give --certs "
            f"the directory holding that CA, replace it with {rollover_hint(directory)} from a directory holding "
            "its ca.crt, or pass --force to replace it now"
        )


def rules_that_differ(installed: Policy, given: Policy) -> list[str]:
    """The names of the rules `given` lacks, adds, or defines otherwise than `installed`."""
    theirs = {r.name: r for r in installed.rules}
    ours = {r.name: r for r in given.rules}
    differ = []
    for name in dict.fromkeys([*theirs, *ours]):
        if name not in ours:
            differ.append(f"{name} (only installed)")
        elif name not in theirs:
            differ.append(f"{name} (only in --config)")
        elif ours[name] != theirs[name]:
            differ.append(f"{name} (defined otherwise)")
    return differ


def check_policy_agrees(installed: Policy, where: str, given: Policy, config: str) -> None:
    """Raise `PolicyDisagrees` when --config `config` is not the policy the webhook serves
    (from `where`): its entries would leave pods of the installed rules without a caBundle, or
    register rules the webhook does not apply."""
    differ = rules_that_differ(installed, given)
    if differ:
        raise PolicyDisagrees(
            f"--config {config} differs from the policy the webhook serves ({where}) in the rules "
            f"{', '.join(differ)}: leave --config out to register the installed policy, change the installed "
            "policy first, or pass --force to register --config's rules"
        )


def _decoded(value: Any) -> bytes:
    """A base64 field of the API's JSON (Secret data, caBundle); b"" when absent or not base64."""
    if not isinstance(value, str):
        return b""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return b""


def _pem_certificates(pem: bytes) -> tuple[x509.Certificate, ...]:
    if not pem:
        return ()
    try:
        return tuple(x509.load_pem_x509_certificates(pem))
    except ValueError:
        return ()
