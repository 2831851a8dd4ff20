"""`netqos-webhook certs`: write a CA and a server certificate, or renew the latter from the former."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webhook.errors import RuntimeFailure
from webhook.names import DEFAULT_CA_DAYS, DEFAULT_CERT_DAYS, DEFAULT_NAMESPACE, DEFAULT_SERVICE


@dataclass(frozen=True)
class CertsArgs:
    out: Path
    service: str = DEFAULT_SERVICE
    namespace: str = DEFAULT_NAMESPACE
    hosts: tuple[str, ...] = ()
    days: int = DEFAULT_CERT_DAYS
    ca_days: int = DEFAULT_CA_DAYS
    key_type: str = "ecdsa"
    renew_before: int | None = None  # renew only, when due


def run(args: CertsArgs) -> int:
    from webhook.certs import CertFiles, generate, renew

    try:
        if args.renew_before is not None:
            done = renew(args.out, args.renew_before, args.days, args.hosts, args.key_type)
        else:
            files = generate(args.out, args.service, args.namespace, args.hosts, args.days, args.key_type, args.ca_days)
    except OSError as err:
        raise RuntimeFailure(f"cannot write certificates into {args.out}: {err.strerror}") from None
    if args.renew_before is None:
        for path in (files.ca_cert, files.ca_key, files.cert, files.key):
            print(path)
        return 0
    cert = CertFiles(args.out).cert
    if done.renewed:
        until = f"{done.not_after:%Y-%m-%d %H:%M}Z"
        print(f"renewed {cert} ({done.reason}): now valid until {until} for {', '.join(done.names)}")
    else:
        print(f"left {cert} alone: {done.reason}")
    return 0
