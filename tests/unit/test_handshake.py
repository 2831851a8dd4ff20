"""webhook.serving.handshake: the reason for each kind of failed handshake, and a log that a flood
cannot flood (every failure still counted)."""

import errno
import logging
import ssl

import pytest

from webhook.serving import metrics
from webhook.serving.handshake import HINTS, FailureLog, HandshakeTimeout, reason


def openssl_error(name: str) -> ssl.SSLError:
    err = ssl.SSLError(1, f"[SSL: {name}] {name.lower()} (_ssl.c:1006)")
    err.reason = name
    return err


@pytest.mark.parametrize(
    "err, expected",
    [
        (openssl_error("HTTP_REQUEST"), "http_request"),
        (openssl_error("TLSV1_ALERT_UNKNOWN_CA"), "unknown_ca"),
        (openssl_error("SSLV3_ALERT_BAD_CERTIFICATE"), "unknown_ca"),  # what Go's crypto/tls sends
        (openssl_error("UNSUPPORTED_PROTOCOL"), "protocol_version"),
        (openssl_error("PEER_DID_NOT_RETURN_A_CERTIFICATE"), "client_certificate"),
        (openssl_error("UNEXPECTED_EOF_WHILE_READING"), "eof"),
        (ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), "eof"),
        (ConnectionResetError(errno.ECONNRESET, "reset"), "eof"),
        (HandshakeTimeout(), "timeout"),
        (openssl_error("NO_SHARED_CIPHER"), "other"),
    ],
)
def test_each_failure_has_its_reason(err, expected):
    assert reason(err) == expected


def test_every_reason_is_a_metric_label_with_a_hint():
    assert set(HINTS) == set(metrics.HANDSHAKE_REASONS)


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_logs_a_burst_per_window_then_one_summary_and_counts_everything(caplog):
    counter = metrics._metrics().handshake_errors.labels("eof")
    before = counter._value.get()
    clock = Clock()
    failures = FailureLog(clock, burst=3, window=10.0)
    with caplog.at_level(logging.INFO, logger="webhook.serving.handshake"):
        for _ in range(100):
            failures.failed(ConnectionResetError(errno.ECONNRESET, "reset"), "127.0.0.1:1")
        clock.now += 10.0
        failures.failed(openssl_error("TLSV1_ALERT_UNKNOWN_CA"), "10.0.0.1:443")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3 + 1 + 1
    assert "97 more TLS handshake failures were not logged" in messages[3] and "eof 97" in messages[3]
    assert messages[4].startswith(
        "TLS handshake failed: client rejected our certificate (unknown CA): is the caBundle current?"
    )
    assert caplog.records[4].peer == "10.0.0.1:443" and caplog.records[4].levelno == logging.WARNING
    assert counter._value.get() - before == 100
