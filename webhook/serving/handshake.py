"""Failed TLS handshakes: a short reason, a counter, and a log line an operator can act on.

Each failure is counted in `netqos_tls_handshake_errors_total{reason}` and logged as one line
(JSON with `--log-format json`) naming the peer and the reason, at most `burst` lines per `window`
seconds per worker; the failures beyond that are counted by reason and summed up in one line when
logging resumes, so a flood of bad connections cannot flood the log (the counter stays exact).

Reasons (a fixed set, so the metric's labels stay bounded):
- `http_request`: plain HTTP sent to the TLS port;
- `unknown_ca`: the client rejected our certificate (alerts unknown_ca, bad_certificate,
  certificate_unknown). For the API server this is a stale `caBundle` in the webhook
  configuration: the certificate was re-issued by another CA;
- `protocol_version`: the client offers no version we accept (TLS 1.2 or newer);
- `client_certificate`: with `--client-ca`, no client certificate or one that CA did not sign;
- `eof`: the client closed or reset the connection during the handshake (port scans, TCP probes);
- `timeout`: no complete handshake within the handshake deadline (a silent connection);
- `other`: anything else (the line carries OpenSSL's reason).
"""

from __future__ import annotations

import errno
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from webhook.serving import metrics

HINTS = {
    "http_request": "client sent plain HTTP to the TLS port: use https://",
    "unknown_ca": "client rejected our certificate (unknown CA): is the caBundle current?",
    "protocol_version": "client offers no TLS version we accept (TLS 1.2 or newer)",
    "client_certificate": "client sent no certificate, or one not signed by --client-ca",
    "eof": "client closed the connection during the TLS handshake",
    "timeout": "no TLS handshake within the handshake deadline; connection closed",
    "other": "TLS handshake failed",
}
# Quiet reasons: what port scanners and silent connections cause; logged at INFO, not WARNING.
QUIET = frozenset({"eof", "timeout"})
_OPENSSL_REASONS = {
    "HTTP_REQUEST": "http_request",
    "HTTPS_PROXY_REQUEST": "http_request",
    "TLSV1_ALERT_UNKNOWN_CA": "unknown_ca",
    "SSLV3_ALERT_BAD_CERTIFICATE": "unknown_ca",  # Go's crypto/tls (the API server) sends this one
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "unknown_ca",
    "UNSUPPORTED_PROTOCOL": "protocol_version",
    "WRONG_VERSION_NUMBER": "protocol_version",
    "NO_PROTOCOLS_AVAILABLE": "protocol_version",
    "TLSV1_ALERT_PROTOCOL_VERSION": "protocol_version",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "client_certificate",
    "CERTIFICATE_VERIFY_FAILED": "client_certificate",
    "UNEXPECTED_EOF_WHILE_READING": "eof",
}
_EOF_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN, errno.ECONNABORTED})

log = logging.getLogger(__name__)


class HandshakeTimeout(Exception):
    """Raised into a handshake when the handshake deadline passes."""


def reason(err: BaseException) -> str:
    """The short reason for a handshake that raised `err`."""
    if isinstance(err, HandshakeTimeout):
        return "timeout"
    if isinstance(err, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return "eof"
    if isinstance(err, ssl.SSLError):
        return _OPENSSL_REASONS.get(str(getattr(err, "reason", "") or ""), "other")
    if isinstance(err, OSError) and (err.errno in _EOF_ERRNOS or err.errno is None):
        return "eof"
    return "other"


@dataclass
class FailureLog:
    """Counts every failure; logs at most `burst` of them per `window` seconds (one per worker)."""

    clock: Callable[[], float]
    burst: int = 10
    window: float = 10.0
    _window_start: float = field(default=float("-inf"), init=False)
    _logged: int = field(default=0, init=False)
    _suppressed: dict[str, int] = field(default_factory=dict, init=False)

    def failed(self, err: BaseException, peer: str) -> str:
        why = reason(err)
        metrics.tls_handshake_error(why)
        now = self.clock()
        if now - self._window_start >= self.window:
            self._summarise()
            self._window_start, self._logged = now, 0
        if self._logged >= self.burst:
            self._suppressed[why] = self._suppressed.get(why, 0) + 1
            return why
        self._logged += 1
        level = logging.INFO if why in QUIET else logging.WARNING
        detail = "" if why in QUIET else f" ({_short(err)})"
        log.log(level, "TLS handshake failed: %s%s", HINTS[why], detail, extra={"peer": peer, "reason": why})
        return why

    def _summarise(self) -> None:
        if not self._suppressed:
            return
        total = sum(self._suppressed.values())
        log.warning(
            "%d more TLS handshake failures were not logged (at most %d lines per %g s); by reason: %s",
            total,
            self.burst,
            self.window,
            ", ".join(f"{k} {v}" for k, v in sorted(self._suppressed.items())),
            extra={"suppressed": dict(self._suppressed)},
        )
        self._suppressed = {}


def _short(err: BaseException) -> str:
    text = getattr(err, "reason", None) or str(err) or type(err).__name__
    return str(text)[:200]
