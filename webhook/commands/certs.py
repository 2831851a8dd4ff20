"""`netqos-webhook certs`: write a CA and a server certificate, renew the latter from the former,
or roll the CA over; never replace a CA by accident."""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from webhook.commands import flags, typed
from webhook.errors import RuntimeFailure, UsageError
from webhook.names import DEFAULT_CA_DAYS, DEFAULT_CERT_DAYS, DEFAULT_NAMESPACE, DEFAULT_SERVICE, KEY_TYPES

if TYPE_CHECKING:  # webhook.certs imports cryptography: only when a certificate is made
    from webhook.certs import CertFiles

HELP = (
    "Write a CA (10 years) and a server certificate (1 year) for the webhook's Service: ca.crt, ca.key, "
    "tls.crt, tls.key. An existing CA is never replaced without --new-ca or --force; --renew-before "
    "re-issues the server certificate under it; --client NAME writes a client certificate for serve --client-ca."
)
EXAMPLE = "netqos-webhook certs --out certs --service netqos-webhook --namespace netqos-system --host 127.0.0.1"
MAX_CERT_DAYS = 36500  # 100 years, well inside X.509's dates (the year 9999)


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
    client: str | None = None  # write NAME.crt/NAME.key, a client certificate, instead of the server pair


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "certs", HELP, EXAMPLE, _main)
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="directory to write the four files into")
    p.add_argument(
        "--service", default=DEFAULT_SERVICE, metavar="NAME", help=f"Service name (default {DEFAULT_SERVICE})"
    )
    p.add_argument(
        "--namespace", default=DEFAULT_NAMESPACE, metavar="NS", help=f"Service namespace (default {DEFAULT_NAMESPACE})"
    )
    p.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="H",
        help="extra DNS name or IP address for the certificate (repeatable)",
    )
    flags.number(
        p,
        "--days",
        1,
        MAX_CERT_DAYS,
        DEFAULT_CERT_DAYS,
        "server certificate validity in days; the CA must outlive it",
    )
    flags.number(
        p,
        "--ca-days",
        1,
        MAX_CERT_DAYS,
        DEFAULT_CA_DAYS,
        "CA validity in days: longer than --days, so --renew-before can re-issue the server certificate "
        "under the same CA",
    )
    p.add_argument("--key-type", choices=KEY_TYPES, default="ecdsa", help="ecdsa (P-256, default) or rsa (2048)")
    replace = p.add_mutually_exclusive_group()
    replace.add_argument(
        "--client",
        metavar="NAME",
        help="write a client certificate instead (NAME.crt, NAME.key; common name NAME, extended key usage "
        "clientAuth) signed by the CA in --out, making a CA there if it holds none: what serve --client-ca "
        "--out/ca.crt accepts, for the API server's admission kubeconfig; --days is its validity",
    )
    replace.add_argument(
        "--new-ca",
        action="store_true",
        help="replace the CA in --out by a new one (a rollover): also writes ca-bundle.crt, the new and the "
        "previous CA, for the caBundle while the servers switch to the new certificate",
    )
    replace.add_argument(
        "--force", action="store_true", help="replace the CA in --out by a new one, trusting only the new one"
    )
    flags.number(
        p,
        "--renew-before",
        1,
        MAX_CERT_DAYS,
        None,
        "renew only: re-issue tls.crt/tls.key from the existing CA in --out when the certificate "
        "expires within DAYS (or is missing, or lacks a --host); leave a valid one alone. The CA "
        "is kept, so the webhook's caBundle stays the same",
        "DAYS",
    )


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(CertsArgs, parsed, hosts=tuple(parsed.host)), out)


def run(args: CertsArgs, out: TextIO) -> int:
    from webhook.certs import CertFiles, check_names

    files = CertFiles(args.out)
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is not a directory; give a directory (it is made when missing)")
    check_names(args.service, args.namespace, args.hosts)
    if args.renew_before is not None:
        if args.force or args.new_ca or args.client is not None:
            raise UsageError(
                "--renew-before keeps the CA and renews the server certificate; it does not go with --force, "
                "--new-ca or --client"
            )
        return _renew(args, files, out)
    if args.client is not None:
        return _client(args, files, out)
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
            print(path, file=out)
    return 0


def _renew(args: CertsArgs, files: CertFiles, out: TextIO) -> int:
    from webhook.certs import renew

    try:
        done = renew(args.out, args.renew_before or 0, args.days, args.hosts, args.key_type)
    except OSError as err:
        raise RuntimeFailure(f"cannot write certificates into {args.out}: {err.strerror}") from None
    if done.renewed:
        until = f"{done.not_after:%Y-%m-%d %H:%M}Z"
        print(f"renewed {files.cert} ({done.reason}): now valid until {until} for {', '.join(done.names)}", file=out)
    else:
        print(f"left {files.cert} alone: {done.reason}", file=out)
    return 0


def _client(args: CertsArgs, files: CertFiles, out: TextIO) -> int:
    from webhook.certs import issue_client

    if args.hosts:
        raise UsageError("--host names a server; a client certificate carries only its --client NAME")
    try:
        made = issue_client(args.out, args.client or "", args.days, args.key_type, args.ca_days)
    except OSError as err:
        raise RuntimeFailure(f"cannot write certificates into {args.out}: {err.strerror}") from None
    if made.ca_made:
        print(files.ca_cert, file=out)
        print(files.ca_key, file=out)
    print(made.cert, file=out)
    print(made.key, file=out)
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
