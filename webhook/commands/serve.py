"""`netqos-webhook serve`: check everything that can be checked, then hand over to gunicorn."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.commands import typed
from webhook.errors import UsageError
from webhook.names import DEV_CERT_DIR, DEV_HOSTS
from webhook.policy import policy_warnings
from webhook.validation import is_dns1123_subdomain_caseless

if TYPE_CHECKING:  # webhook.certs imports cryptography: only when certs/ is used
    from webhook.certs import CertFiles

log = logging.getLogger("webhook")

# HOST:PORT, [IPV6]:PORT or :PORT; the host is a DNS name or an IP address.
# Matched whole (fullmatch): a `$` would let a trailing newline through.
_BIND = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.%\w]+)\]|(?P<host>[^:\[\]]*)):(?P<port>[^:]*)")


@dataclass(frozen=True)
class ServeArgs:
    """`serve`'s flags: `webhook.serving.server.ServeOptions` by the same names, where the
    certificate may be left out, plus the policy file."""

    bind: str
    certfile: Path | None  # both or neither; neither: development certificates in certs/
    keyfile: Path | None
    config: str | None
    workers: int
    worker_class: str
    threads: int
    keepalive: int
    max_body_bytes: int
    body_budget_bytes: int
    handshake_timeout: float
    header_timeout: float
    body_timeout: float
    log_level: str
    log_format: str
    client_ca: Path | None
    metrics_dir: Path | None


def check_bind(bind: str) -> tuple[str, int]:
    """HOST:PORT as gunicorn takes it, checked: a host name or IP address (IPv6 in brackets, an
    empty host for every address) and a port from 1 to 65535. `unix:PATH` and `fd://N` pass."""
    if bind.startswith(("unix:", "fd://")):
        return bind, 0
    example = "e.g. 127.0.0.1:8443, 0.0.0.0:8443 or [::]:8443"
    match = _BIND.fullmatch(bind)
    if match is None:
        raise UsageError(f"--bind {bind!r} is not HOST:PORT ({example}; an IPv6 address goes in brackets)")
    port_text = match["port"]
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"--bind {bind!r}: the port must be a number from 1 to 65535, got {port_text!r} ({example})")
    if match["v6"] is not None:
        try:
            ipaddress.IPv6Address(match["v6"])
        except ValueError:
            raise UsageError(f"--bind {bind!r}: {match['v6']!r} is not an IPv6 address ({example})") from None
        return match["v6"], int(port_text)
    host = match["host"]
    if host and not _is_host(host):
        raise UsageError(f"--bind {bind!r}: {host!r} is not a host name or IP address ({example})")
    return host, int(port_text)


def _is_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        # A host name in any case; ASCII only (RE2's caseless match also folds the Kelvin sign).
        return host.isascii() and not is_dns1123_subdomain_caseless(host)


def run(args: ServeArgs) -> int:
    check_bind(args.bind)
    if (args.certfile is None) != (args.keyfile is None):
        raise UsageError("--certfile and --keyfile go together: give both, or neither to use certs/")
    if args.threads != 1 and args.worker_class != "gthread":
        raise UsageError(f"--threads is for --worker-class gthread only; the {args.worker_class} worker ignores it")
    _check_body_budget(args.max_body_bytes, args.body_budget_bytes)
    if args.metrics_dir is not None:
        _check_metrics_dir(args.metrics_dir)

    from webhook.serving import logs
    from webhook.serving.reload import PolicyWatcher, load_snapshot
    from webhook.serving.server import ServeOptions, serve
    from webhook.serving.tls import TLSFiles, check_files

    logs.configure(args.log_format, args.log_level)
    snapshot = load_snapshot(args.config)
    for warning in policy_warnings(snapshot.policy):
        log.warning("policy %s: %s", snapshot.source, warning)
    certfile, keyfile = (args.certfile, args.keyfile) if args.certfile and args.keyfile else _dev_certificate()
    for path in (certfile, keyfile, args.client_ca):
        if path is not None and not os.access(path, os.R_OK):
            raise UsageError(_unreadable(path))
    problem = check_files(TLSFiles(certfile, keyfile, args.client_ca))
    if problem:
        raise UsageError(f"{problem}; fix the files or re-create them with 'netqos-webhook certs'")
    options = typed(ServeOptions, args, certfile=certfile, keyfile=keyfile)
    log.info(
        "policy from %s: version %s, rules %s%s",
        args.config or "the built-in default",
        snapshot.version,
        ", ".join(r.name for r in snapshot.policy.rules),
        "; watching the file for changes" if args.config else "",
    )
    if args.client_ca:
        log.info("client certificates required, signed by %s", args.client_ca)
    serve(options, snapshot.policy, PolicyWatcher(snapshot, args.config))  # BindError: exit 1
    return 0


def _unreadable(path: Path) -> str:
    """Why `path` cannot be read, never calling a file that is there missing."""
    if path.exists():
        return f"cannot read {path}: it exists but this user may not read it; fix its permissions or the path"
    return f"cannot read {path}: there is no such file; fix the path, or create the files with 'netqos-webhook certs'"


def _check_body_budget(max_body_bytes: int, budget_bytes: int) -> None:
    from webhook.serving.app import BodyBudget

    smallest = BodyBudget.smallest_for(max_body_bytes)
    if budget_bytes < smallest:
        raise UsageError(
            f"--body-budget-bytes {budget_bytes} cannot hold a body of --max-body-bytes {max_body_bytes} beside the "
            f"bytes kept for small bodies: every body near the limit would be refused; give at least {smallest}, "
            "or lower --max-body-bytes"
        )


def _check_metrics_dir(path: Path) -> None:
    """A directory the workers can write their metric files into, made if missing."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"--metrics-dir {path} is not a directory; give a directory for the workers' metric files")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(
            f"--metrics-dir {path}: cannot create it ({err.strerror}); give a writable directory"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--metrics-dir {path} is not writable; give a writable directory")


def _dev_certificate() -> tuple[Path, Path]:
    """certs/tls.crt and tls.key; made only where nothing would be replaced.

    A CA found there is kept, since a caBundle may trust it: with ca.crt and ca.key and no server
    pair, the pair is issued under that CA (as `certs --renew-before` does). A new CA is made only
    into a directory holding none of the files `netqos-webhook certs` writes. Anything else (half a
    pair, half a CA, a rollover bundle alone) is refused with the file found and the one missing."""
    from webhook.certs import RENEWAL_DAYS, CertFiles, generate, renew

    files = CertFiles(DEV_CERT_DIR)
    if files.cert.exists() and files.key.exists():
        return files.cert, files.key
    _refuse_half_pair(files)
    if files.ca_cert.exists() and files.ca_key.exists():
        done = renew(DEV_CERT_DIR, RENEWAL_DAYS, hosts=DEV_HOSTS)
        log.warning(
            "no --certfile/--keyfile and no server certificate in %s/: issued %s under the CA found there (%s), "
            "valid until %s for %s",
            DEV_CERT_DIR,
            files.cert,
            files.ca_cert,
            f"{done.not_after:%Y-%m-%d %H:%M}Z",
            ", ".join(done.names),
        )
        return files.cert, files.key
    _refuse_half_ca(files)
    generate(DEV_CERT_DIR, hosts=DEV_HOSTS)
    log.warning(
        "no --certfile/--keyfile and no %s: generated a development CA and certificate for %s "
        "and the in-cluster Service names in %s/ (trust %s)",
        files.cert,
        ", ".join(DEV_HOSTS),
        DEV_CERT_DIR,
        files.ca_cert,
    )
    return files.cert, files.key


def _refuse_half_pair(files: CertFiles) -> None:
    """tls.crt without tls.key, or the reverse: never replaced, whatever else the directory holds."""
    from webhook.certs import RENEWAL_DAYS

    for found, missing in ((files.cert, files.key), (files.key, files.cert)):
        if found.exists() and not missing.exists():
            if files.ca_cert.exists() and files.ca_key.exists():
                todo = (
                    f"copy {missing.name} there, give --certfile/--keyfile, or re-issue the pair under the CA "
                    f"found there with 'netqos-webhook certs --out {files.directory} --renew-before {RENEWAL_DAYS}'"
                )
            else:
                todo = f"copy {missing.name} there, or give --certfile and --keyfile"
            raise UsageError(
                f"{files.directory}/ holds {found.name} without {missing.name}; serve does not replace a "
                f"certificate it finds: {todo}"
            )


def _refuse_half_ca(files: CertFiles) -> None:
    """Half a CA, or a rollover bundle without its CA, and no server pair: never replaced."""
    pairs = ((files.ca_cert, files.ca_key), (files.ca_key, files.ca_cert), (files.ca_bundle, files.ca_cert))
    for found, missing in pairs:
        if found.exists() and not missing.exists():
            raise UsageError(
                f"{files.directory}/ holds {found.name} without {missing.name}, and no {files.cert.name}/"
                f"{files.key.name}; serve does not replace a CA it finds, which a caBundle may trust: copy "
                f"{missing.name} there to issue the server certificate under it, give --certfile and --keyfile, "
                f"or replace the CA with 'netqos-webhook certs --out {files.directory} --new-ca' (a rollover: "
                f"{files.ca_bundle.name} keeps the old CA trusted)"
            )
