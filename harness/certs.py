"""Certificates for a test server, from the project's own generator (what `netqos-webhook certs` writes)."""

from __future__ import annotations

from pathlib import Path

from webhook.certs import CertFiles, generate
from webhook.names import DEFAULT_CA_DAYS, DEFAULT_CERT_DAYS

#: Names a local client may use besides the Service's DNS names, which the certificate always carries.
LOCAL_HOSTS = ("localhost", "127.0.0.1")


def make_certs(directory: Path, days: int = DEFAULT_CERT_DAYS, ca_days: int = DEFAULT_CA_DAYS) -> CertFiles:
    """A new CA and a server certificate for the Service and `LOCAL_HOSTS`, written into `directory`."""
    return generate(directory, hosts=LOCAL_HOSTS, days=days, ca_days=ca_days)
