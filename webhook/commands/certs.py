"""`netqos-webhook certs`: write a CA and a server certificate, renew the latter from the former,
or roll the CA over; never replace a CA by accident."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.errors import RuntimeFailure, UsageError
from webhook.names import DEFAULT_CA_DAYS, DEFAULT_CERT_DAYS, DEFAULT_NAMESPACE, DEFAULT_SERVICE

if TYPE_CHECKING:  # webhook.certs imports cryptography: only when a certificate is made
    from webhook.certs import CertFiles


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
    force: bool = False  # replace an existing CA, trusting only the new one
    new_ca: bool = False  # replace an existing CA, keeping the old one in ca-bundle.crt


def run(args: CertsArgs) -> int:
    from webhook.certs import CertFiles, check_names

    files = CertFiles(args.out)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is not a directory; give a directory (it is made when missing)")
    check_names(args.service, args.namespace, args.hosts)
    if args.renew_before is not None:
        if args.force or args.new_ca:
            raise UsageError("--renew-before keeps the CA; it does not go with --force or --new-ca")
        return _renew(args, files)
    if files.has_ca() and not (args.force or args.new_ca):
        raise UsageError(_refusal(files))
    if (files.cert.exists() or files.key.exists()) and not files.has_ca() and not args.force:
        raise UsageError(
            f"{files.directory} holds {files.cert.name}/{files.key.name} but no CA ({files.ca_cert.name}, "
            f"{files.ca_key.name}): a certificate made elsewhere (cert-manager, a copied Secret), which a new CA "
            "and certificate would replace; write into another directory, or add --force to replace them"
        )
    try:
        from webhook.certs import generate

        generate(
            args.out,
            args.service,
            args.namespace,
            args.hosts,
            args.days,
            args.key_type,
            args.ca_days,
            keep_previous_ca=args.new_ca,
        )
    except OSError as err:
        raise RuntimeFailure(f"cannot write certificates into {args.out}: {err.strerror}") from None
    for path in (files.ca_cert, files.ca_key, files.cert, files.key, files.ca_bundle):
        if path.exists():
            print(path)
    return 0


def _renew(args: CertsArgs, files: CertFiles) -> int:
    from webhook.certs import renew

    try:
        done = renew(args.out, args.renew_before or 0, args.days, args.hosts, args.key_type)
    except OSError as err:
        raise RuntimeFailure(f"cannot write certificates into {args.out}: {err.strerror}") from None
    if done.renewed:
        until = f"{done.not_after:%Y-%m-%d %H:%M}Z"
        print(f"renewed {files.cert} ({done.reason}): now valid until {until} for {', '.join(done.names)}")
    else:
        print(f"left {files.cert} alone: {done.reason}")
    return 0


def _refusal(files: CertFiles) -> str:
    from cryptography import x509

    replace = (
        "add --new-ca (a rollover: ca-bundle.crt keeps the old CA trusted during the switch) or --force (the old "
        "CA is no longer trusted at once)"
    )
    if not files.ca_key.exists():
        return (
            f"{files.directory} holds {files.ca_cert.name} without {files.ca_key.name}, a CA that cannot sign: copy "
            f"its key there to renew under it ('netqos-webhook certs --out {files.directory} --renew-before 30'), "
            f"or replace it with 'netqos-webhook certs --out {files.directory} --new-ca' (a rollover: ca-bundle.crt "
            "keeps the old CA trusted during the switch) or --force"
        )
    if not files.ca_cert.exists():
        return (
            f"{files.directory} holds {files.ca_key.name} without {files.ca_cert.name}: to replace that CA, {replace}"
        )
    try:
        until = x509.load_pem_x509_certificate(files.ca_cert.read_bytes()).not_valid_after_utc
        what = f"a CA ({files.ca_cert}, valid until {until:%Y-%m-%d})"
        expired = until <= dt.datetime.now(dt.UTC)
    except (OSError, ValueError):
        what, expired = f"a CA ({files.ca_cert} or {files.ca_key})", False
    renew = f"'netqos-webhook certs --out {files.directory} --renew-before 30'"
    instead = "" if expired else f"to renew the server certificate under it, run {renew}; "
    held = f"{files.directory} already holds {what}, which the webhook's caBundle may trust"
    return f"{held}: {instead}to replace the CA, {replace}"
