"""`netqos-webhook serve`: check everything that can be checked, then hand over to gunicorn."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from webhook.commands import flags, typed
from webhook.errors import UsageError
from webhook.names import (
    DEFAULT_BIND,
    DEFAULT_BODY_BUDGET_BYTES,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_CONNECTION_JITTER,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTION_AGE,
    DEFAULT_MAX_CONNECTION_REQUESTS,
    DEFAULT_WORKERS,
    DEV_CERT_DIR,
    DEV_HOSTS,
    LOG_FORMATS,
    LOG_LEVELS,
    METRICS_DIR_ENV,
    RENEWAL_DAYS,
    WORKER_CLASSES,
)
from webhook.policy import policy_warnings
from webhook.validation import is_host

if TYPE_CHECKING:  # webhook.certs imports cryptography: only when certs/ is used
    from webhook.certs import CertFiles

log = logging.getLogger("webhook")

HELP = "Serve the webhook over HTTPS (gunicorn, TLS 1.2+)."
EXAMPLE = "netqos-webhook serve --bind 0.0.0.0:8443 --certfile /tls/tls.crt --keyfile /tls/tls.key"

# The ranges of the numeric flags. Workers and threads: far above what one pod's CPUs use
# (docs/performance.md), far below what exhausts a machine. Seconds: five minutes for a deadline
# or an hour of keep-alive. Bodies: from 1 KiB to 64 MiB, the budget up to 1 GiB.
MAX_WORKERS = 64
MAX_THREADS = 256
MAX_SECONDS = 300
MAX_KEEPALIVE_SECONDS = 3600
MAX_CONNECTION_REQUESTS = 1_000_000
MIN_BODY_BYTES = 1024
MAX_BODY_BYTES = 64 * 2**20
MAX_BODY_BUDGET_BYTES = 2**30

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
    max_connection_age: float
    max_connection_requests: int
    connection_jitter: float
    log_level: str
    log_format: str
    client_ca: Path | None
    metrics_dir: Path | None


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "serve", HELP, EXAMPLE, _main)
    p.add_argument(
        "--bind",
        default=DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_BIND}; IPv6 as [::]:8443)",
    )
    p.add_argument("--certfile", type=Path, metavar="FILE", help="server certificate (PEM); default certs/tls.crt")
    p.add_argument("--keyfile", type=Path, metavar="FILE", help="server private key (PEM); default certs/tls.key")
    flags.config(p)
    flags.number(p, "--workers", 1, MAX_WORKERS, DEFAULT_WORKERS, "worker processes")
    p.add_argument(
        "--worker-class",
        choices=WORKER_CLASSES,
        default="gevent",
        help="gunicorn worker class (default gevent; see docs/performance.md)",
    )
    flags.number(p, "--threads", 1, MAX_THREADS, 1, "threads per worker, for --worker-class gthread only")
    flags.number(
        p,
        "--keepalive",
        1,
        MAX_KEEPALIVE_SECONDS,
        DEFAULT_KEEPALIVE_SECONDS,
        "keep idle connections this long; the API server keeps them 90 s",
        "SECONDS",
    )
    flags.number(
        p,
        "--max-body-bytes",
        MIN_BODY_BYTES,
        MAX_BODY_BYTES,
        DEFAULT_MAX_BODY_BYTES,
        "larger request bodies get 413; the default is the API server's own limit, 3 MiB",
    )
    flags.number(
        p,
        "--body-budget-bytes",
        MIN_BODY_BYTES,
        MAX_BODY_BUDGET_BYTES,
        DEFAULT_BODY_BUDGET_BYTES,
        "request-body bytes one worker holds at once; a body beyond gets 503 with Retry-After. It must "
        "leave room for a body of --max-body-bytes beside those reserved for small bodies; see "
        "docs/operations.md, Hostile clients",
    )
    for stage, default, what in (
        ("handshake", DEFAULT_HANDSHAKE_TIMEOUT, "a TLS handshake, from accept; then the connection is closed"),
        ("header", DEFAULT_HEADER_TIMEOUT, "the request line and headers, from their first byte; then closed"),
        ("body", DEFAULT_BODY_TIMEOUT, "a request body; then 408 and closed (gevent workers)"),
    ):
        flags.number(p, f"--{stage}-timeout", 1, MAX_SECONDS, int(default), f"deadline for {what}", "SECONDS")
    _connection_limits(p)
    p.add_argument("--log-level", default="info", choices=LOG_LEVELS, help="log level (default info)")
    p.add_argument(
        "--log-format",
        default="json",
        choices=LOG_FORMATS,
        help="json: one JSON object per line (default); text: for a terminal",
    )
    p.add_argument(
        "--client-ca",
        type=Path,
        metavar="FILE",
        help="require TLS clients (the API server) to present a certificate signed by this CA (PEM)",
    )
    p.add_argument(
        "--metrics-dir",
        type=Path,
        metavar="DIR",
        default=os.environ.get(METRICS_DIR_ENV) or None,
        help=f"writable directory for the workers' metric files, emptied at start "
        f"(default: ${METRICS_DIR_ENV}, else a temporary directory, removed at exit, or at a later "
        "start when the server was killed; docs/operations.md, Metrics)",
    )


def _connection_limits(p: flags.Group) -> None:
    """How long a kept-alive connection is served (webhook.serving.keepalive)."""
    why = (
        "then its answer carries Connection: close and the API server opens a new connection, which the "
        "Service may send to another replica (gevent workers; 0: no limit)"
    )
    flags.number(
        p,
        "--max-connection-age",
        0,
        MAX_KEEPALIVE_SECONDS,
        DEFAULT_MAX_CONNECTION_AGE,
        f"serve a connection this long, +-the jitter; {why}",
        "SECONDS",
        fraction=True,
    )
    flags.number(
        p,
        "--max-connection-requests",
        0,
        MAX_CONNECTION_REQUESTS,
        DEFAULT_MAX_CONNECTION_REQUESTS,
        f"serve this many requests on a connection, +-the jitter; {why}",
    )
    flags.number(
        p,
        "--connection-jitter",
        0,
        1,
        DEFAULT_CONNECTION_JITTER,
        "each connection's age and request limits are drawn uniformly within this fraction of them, so the "
        "connections of one burst end at different times",
        "FRACTION",
        fraction=True,
    )


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(ServeArgs, parsed), out)


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
    if host and host.replace(".", "").isdigit() and not _is_ip(host):  # a DNS name never reads as numbers alone
        raise UsageError(
            f"--bind {bind!r}: {host!r} is not an IPv4 address (each of its four parts 0 to 255; {example})"
        )
    if host and not is_host(host):
        raise UsageError(f"--bind {bind!r}: {host!r} is not a host name or IP address ({example})")
    return host, int(port_text)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def run(args: ServeArgs, out: TextIO) -> int:
    """Check the flags and files, then serve until stopped; `out` is unused: the server logs
    (JSON lines) to stderr."""
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
    from webhook.certs import CertFiles, generate, renew

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
    from webhook.certs import rollover_hint

    pairs = ((files.ca_cert, files.ca_key), (files.ca_key, files.ca_cert), (files.ca_bundle, files.ca_cert))
    for found, missing in pairs:
        if found.exists() and not missing.exists():
            raise UsageError(
                f"{files.directory}/ holds {found.name} without {missing.name}, and no {files.cert.name}/"
                f"{files.key.name}; serve does not replace a CA it finds, which a caBundle may trust: copy "
                f"{missing.name} there to issue the server certificate under it, give --certfile and --keyfile, "
                f"or replace the CA with {rollover_hint(files.directory)}"
            )
