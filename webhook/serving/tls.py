"""TLS for serving: the context, certificate rotation without a restart, optional client CA.

Every context is TLS 1.2 or newer. With a client CA (`serve --client-ca`), a client must present a
certificate that CA signed (the API server does so when its AdmissionConfiguration gives it a
kubeconfig with a client certificate for the webhook; docs/operations.md).

Rotation. cert-manager (or `netqos-webhook certs --renew-before`) replaces `tls.crt`/`tls.key`; a
mounted Secret changes by a `..data` symlink swap. gevent's server keeps the one context gunicorn's
`ssl_context` hook returned, for the life of the worker. We keep that context as the *front*
context and give it an `sni_callback`, which OpenSSL calls during every ClientHello, with or
without SNI (clients dialling an IP address send none). The callback
1. at most once per `interval`, stats the files; when they changed, builds a complete new context
   off to the side (`load_cert_chain` checks the key matches the certificate). If that fails (a
   half-rotated pair, an unreadable file) the current context stays and the error is logged and
   counted; the next change of the files is tried again;
2. points the connection at the newest good context (`SSLSocket.context = ...`, the documented
   way to switch certificates in that callback).
Connections already open keep the certificate they were handshaken with; new ones get the new
one; no connection is ever refused for the swap. The alternative, `load_cert_chain` into the live
context, was not chosen: OpenSSL sets the certificate and then the key, and a failure between the
two (a key that does not match yet) leaves the live context without a usable key.
"""

from __future__ import annotations

import logging
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509

from webhook.serving import metrics
from webhook.serving.filewatch import FileWatch, Look, signature

DEFAULT_INTERVAL = 1.0  # seconds between two looks at the certificate files, per worker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TLSFiles:
    certfile: Path
    keyfile: Path
    client_ca: Path | None = None

    def paths(self) -> tuple[Path, ...]:
        return (self.certfile, self.keyfile) + ((self.client_ca,) if self.client_ca else ())


def build_context(files: TLSFiles) -> ssl.SSLContext:
    """A server context for `files`; raises `ssl.SSLError`/`OSError` when they cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # The API server sets no session cache, so it never resumes: TLS 1.3 tickets would be
    # encrypted and sent after every handshake for nothing (docs/performance.md).
    context.num_tickets = 0
    context.options |= ssl.OP_NO_TICKET
    context.load_cert_chain(certfile=str(files.certfile), keyfile=str(files.keyfile))
    if files.client_ca is not None:
        context.load_verify_locations(cafile=str(files.client_ca))
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def not_after(certfile: Path) -> float:
    """Unix time when the (first) certificate in `certfile` expires."""
    cert = x509.load_pem_x509_certificate(Path(certfile).read_bytes())
    return cert.not_valid_after_utc.timestamp()


def ca_not_after(certfile: Path) -> float | None:
    """Unix time when the CA beside `certfile` (`ca.crt`, as the Secrets of `register` and
    cert-manager hold it) expires; None when there is none or it cannot be read."""
    try:
        return not_after(Path(certfile).parent / "ca.crt")
    except (OSError, ValueError):
        return None


def check_files(files: TLSFiles) -> str | None:
    """None when `files` make a working server context, else what is wrong, for the operator."""
    try:
        build_context(files)
    except (OSError, ssl.SSLError) as err:
        return _reason(files, err)
    return None


def _reason(files: TLSFiles, err: Exception) -> str:
    if isinstance(err, OSError) and err.filename:
        return f"cannot read {err.filename}: {err.strerror}"
    misplaced = _misplaced_pem(files)
    if misplaced:
        return misplaced
    what = ", ".join(str(p) for p in files.paths())
    detail = getattr(err, "reason", None) or str(err)
    if "KEY_VALUES_MISMATCH" in str(err) or detail == "KEY_VALUES_MISMATCH":
        return f"{files.keyfile} is not the key of {files.certfile}"
    return f"unusable TLS files ({what}): {detail}"


_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


def _pem_blocks(path: Path) -> set[str]:
    """The kinds of PEM blocks in `path` (CERTIFICATE, PRIVATE KEY, EC PRIVATE KEY...)."""
    try:
        return {m.decode() for m in _PEM_BLOCK.findall(path.read_bytes())}
    except OSError:
        return set()


def _misplaced_pem(files: TLSFiles) -> str | None:
    """What OpenSSL calls "PEM lib", said in terms of the files: swapped, or the wrong kind."""
    cert, key = _pem_blocks(files.certfile), _pem_blocks(files.keyfile)
    keys = {b for b in cert | key if b.endswith("PRIVATE KEY")}
    if "CERTIFICATE" not in cert and "CERTIFICATE" in key and cert & keys:
        return (
            f"--certfile {files.certfile} holds a private key and --keyfile {files.keyfile} a certificate: "
            "the two are swapped"
        )
    if "CERTIFICATE" not in cert:
        return f"--certfile {files.certfile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    if "ENCRYPTED PRIVATE KEY" in key:
        return f"--keyfile {files.keyfile} is encrypted; the server needs an unencrypted private key"
    if not key & keys and not cert & keys:
        return f"--keyfile {files.keyfile} holds no PEM private key (-----BEGIN PRIVATE KEY-----)"
    if files.client_ca is not None and "CERTIFICATE" not in _pem_blocks(files.client_ca):
        return f"--client-ca {files.client_ca} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    return None


class CertificateRotator:
    """Owns the serving contexts of one worker: the front one gunicorn holds, and the newest."""

    def __init__(
        self, files: TLSFiles, interval: float = DEFAULT_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.files = files
        seen = signature(files.paths())  # before the build: a change in between is seen later
        self.front = build_context(files)  # bad files at start are an error for the caller
        self._watch = FileWatch(files.paths(), interval, clock, seen)
        self.current = self.front
        self.front.sni_callback = self._on_client_hello
        self.reloads = 0
        metrics.certificate_loaded(not_after(files.certfile), ca_not_after(files.certfile))

    def _on_client_hello(self, sslsock: Any, server_name: str | None, context: ssl.SSLContext) -> None:
        try:
            if self._watch.due():
                self.check()
            if self.current is not context:
                sslsock.context = self.current
        except Exception:  # never fail a handshake over rotation; the old certificate still works
            log.exception("certificate rotation check failed; serving the previous certificate")
        return None

    def check(self) -> bool:
        """Look at the files now; use them for new connections if they changed and work.
        A file missing for a moment mid-swap changes nothing: it is looked at again later."""
        if self._watch.look(force=True) is not Look.CHANGED:
            return False
        try:
            context = build_context(self.files)
            expires = not_after(self.files.certfile)
            ca_expires = ca_not_after(self.files.certfile)
        except (OSError, ssl.SSLError, ValueError) as err:
            metrics.certificate_reload(ok=False)
            log.error(
                "TLS files changed but cannot be used: %s; still serving the previous certificate "
                "(tried again when the files change)",
                _reason(self.files, err),
            )
            return False
        self.current = context
        self.reloads += 1
        metrics.certificate_reload(ok=True)
        metrics.certificate_loaded(expires, ca_expires)
        log.info(
            "serving the new certificate from %s (expires %s)",
            self.files.certfile,
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)),
            extra={"certificate_expiry": int(expires)},
        )
        return True
