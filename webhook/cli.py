"""The `netqos-webhook` command: parse the command line, call the command, map errors to exit codes.

Each command lives in `webhook.commands.<name>` and takes typed arguments. Every failure a user
can cause is a `webhook.errors.NetqosError`, printed here as one line with its exit code: 0 success,
1 a failure at run time, 2 bad usage or unusable input, 3 problems found (`review --fail-on`, `status`).
A closed stdout (`| head`) ends the command quietly, as SIGPIPE ends other Unix tools (141).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from webhook import __version__
from webhook.commands import typed
from webhook.commands.manifests import FORMS as MANIFEST_FORMS
from webhook.commands.review import OUTPUTS as REVIEW_OUTPUTS
from webhook.errors import EXIT_USAGE, NetqosError
from webhook.names import (
    CONFIG_ENV,
    DEFAULT_BIND,
    DEFAULT_BODY_BUDGET_BYTES,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_CA_DAYS,
    DEFAULT_CERT_DAYS,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEPALIVE_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE,
    DEFAULT_WORKERS,
    DEV_CERT_DIR,
    KEY_TYPES,
    LOG_FORMATS,
    LOG_LEVELS,
    METRICS_DIR_ENV,
    WORKER_CLASSES,
)
from webhook.policy import Decision
from webhook.scope import NOT_CALLED
from webhook.workloads import KIND_NAMES as WORKLOAD_KINDS

# The ranges of the numeric flags. Workers and threads: far above what one pod's CPUs use
# (docs/performance.md), far below what exhausts a machine. Seconds: five minutes for a deadline
# or an hour of keep-alive. Bodies: from 1 KiB to 64 MiB, the budget up to 1 GiB. Certificates:
# 100 years, well inside X.509's dates (the year 9999).
MAX_WORKERS = 64
MAX_THREADS = 256
MAX_SECONDS = 300
MAX_KEEPALIVE_SECONDS = 3600
MIN_BODY_BYTES = 1024
MAX_BODY_BYTES = 64 * 2**20
MAX_BODY_BUDGET_BYTES = 2**30
MAX_CERT_DAYS = 36500

DECISIONS = (*(d.value for d in Decision), NOT_CALLED)
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_CLOSED_STDOUT = 128 + signal.SIGPIPE

Handler = Callable[[argparse.Namespace], int]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:
        # The reader went away (`| head`): nothing left to say. Point stdout at /dev/null so the
        # interpreter's own flush at exit finds nothing to complain about.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_STDOUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # said by the command's own parser, whose --help lists what it takes
            _command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit:
        sys.stdout.flush()  # --help, --version: a closed pipe shows here, not at exit
        raise
    try:
        code: int = args.handler(args)
    except NetqosError as err:
        print(f"netqos-webhook {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    sys.stdout.flush()
    return code


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command (`netqos-webhook COMMAND`)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (the usage is one --help away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="netqos-webhook",
        description="A mutating admission webhook that turns the pod label qos=latency-sensitive into "
        "preferred node affinity for net=high nodes, so the stock kube-scheduler scores nodes as the "
        "NetQoS scheduler plugin did (net=high 100, unlabelled 10, net=low 0).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'netqos-webhook COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (
        _add_serve,
        _add_review,
        _add_certs,
        _add_explain,
        _add_manifests,
        _add_register,
        _add_status,
        _add_rebalance,
    ):
        add(sub)
    return parser


def _command(sub: Any, name: str, help: str, example: str, handler: Handler) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=handler)
    return parser


def _add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get(CONFIG_ENV) or None,
        help=f"policy file (YAML); default: ${CONFIG_ENV}, else the built-in NetQoS rule",
    )


def _add_webhook_namespace(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--webhook-namespace",
        metavar="NS",
        default=DEFAULT_NAMESPACE,
        help=f"the namespace the webhook runs in (default {DEFAULT_NAMESPACE}): the registration excludes it and "
        "kube-system, so a pod created there is reported as not_called (the API server never calls the webhook)",
    )


def _add_cluster(parser: argparse.ArgumentParser, purpose: str, exclusive: Any = None) -> None:
    """--kubeconfig and --context, for every command that talks to a cluster: `purpose` begins
    --kubeconfig's help ("read the cluster of "); `exclusive`, a group --kubeconfig belongs to."""
    (exclusive or parser).add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{purpose}this kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, "
        "else the in-cluster service account)",
    )
    parser.add_argument(
        "--context", metavar="NAME", help="kubeconfig context (default: the kubeconfig's current context)"
    )


class Range:
    """An argparse type: a whole number from `low` to `high`. Every numeric flag has one, so a
    value that would fork a million workers or overflow a date is one line and exit code 2 before
    anything starts; `--help` and README's command table state it (the tests hold them to it)."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def __call__(self, text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"must be from {self.low} to {self.high}, got {value}")
        return value

    def __repr__(self) -> str:  # argparse names the type in some messages
        return f"a whole number from {self.low} to {self.high}"


def _number(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    flag: str,
    low: int,
    high: int,
    default: int | None,
    help: str,
    metavar: str = "N",
) -> None:
    """A numeric flag, its range (and default) stated at the end of its help."""
    shown = f"from {low} to {high}" + ("" if default is None else f"; default {default}")
    parser.add_argument(flag, type=Range(low, high), default=default, metavar=metavar, help=f"{help} ({shown})")


# --- serve -------------------------------------------------------------------------------------


def _add_serve(sub: Any) -> None:
    p = _command(
        sub,
        "serve",
        "Serve the webhook over HTTPS (gunicorn, TLS 1.2+).",
        "netqos-webhook serve --bind 0.0.0.0:8443 --certfile /tls/tls.crt --keyfile /tls/tls.key",
        _serve,
    )
    p.add_argument(
        "--bind",
        default=DEFAULT_BIND,
        metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_BIND}; IPv6 as [::]:8443)",
    )
    p.add_argument("--certfile", type=Path, metavar="FILE", help="server certificate (PEM); default certs/tls.crt")
    p.add_argument("--keyfile", type=Path, metavar="FILE", help="server private key (PEM); default certs/tls.key")
    _add_config(p)
    _number(p, "--workers", 1, MAX_WORKERS, DEFAULT_WORKERS, "worker processes")
    p.add_argument(
        "--worker-class",
        choices=WORKER_CLASSES,
        default="gevent",
        help="gunicorn worker class (default gevent; see docs/performance.md)",
    )
    _number(p, "--threads", 1, MAX_THREADS, 1, "threads per worker, for --worker-class gthread only")
    _number(
        p,
        "--keepalive",
        1,
        MAX_KEEPALIVE_SECONDS,
        DEFAULT_KEEPALIVE_SECONDS,
        "keep idle connections this long; the API server keeps them 90 s",
        "SECONDS",
    )
    _number(
        p,
        "--max-body-bytes",
        MIN_BODY_BYTES,
        MAX_BODY_BYTES,
        DEFAULT_MAX_BODY_BYTES,
        "larger request bodies get 413; the default is the API server's own limit, 3 MiB",
    )
    _number(
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
        _number(p, f"--{stage}-timeout", 1, MAX_SECONDS, int(default), f"deadline for {what}", "SECONDS")
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
        f"(default: ${METRICS_DIR_ENV}, else a temporary directory)",
    )


def _serve(args: argparse.Namespace) -> int:
    from webhook.commands import serve

    return serve.run(typed(serve.ServeArgs, args))


# --- certs -------------------------------------------------------------------------------------


def _add_certs(sub: Any) -> None:
    p = _command(
        sub,
        "certs",
        "Write a CA (10 years) and a server certificate (1 year) for the webhook's Service: ca.crt, ca.key, "
        "tls.crt, tls.key. An existing CA is never replaced without --new-ca or --force; --renew-before "
        "re-issues the server certificate under it.",
        "netqos-webhook certs --out certs --service netqos-webhook --namespace netqos-system --host 127.0.0.1",
        _certs,
    )
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
    _number(
        p,
        "--days",
        1,
        MAX_CERT_DAYS,
        DEFAULT_CERT_DAYS,
        "server certificate validity in days; the CA must outlive it",
    )
    _number(
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
        "--new-ca",
        action="store_true",
        help="replace the CA in --out by a new one (a rollover): also writes ca-bundle.crt, the new and the "
        "previous CA, for the caBundle while the servers switch to the new certificate",
    )
    replace.add_argument(
        "--force", action="store_true", help="replace the CA in --out by a new one, trusting only the new one"
    )
    _number(
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


def _certs(args: argparse.Namespace) -> int:
    from webhook.commands import certs

    return certs.run(typed(certs.CertsArgs, args, hosts=tuple(args.host)))


# --- review ------------------------------------------------------------------------------------


def _add_review(sub: Any) -> None:
    p = _command(
        sub,
        "review",
        "Dry-run the webhook offline over Pods, AdmissionReviews and the pod templates of workloads "
        f"({', '.join(WORKLOAD_KINDS)}): the same code as POST /mutate. Each FILE is a YAML or JSON file "
        "with one or more documents, a directory of them (not recursive), or - for stdin (e.g. kubectl "
        "kustomize DIR | netqos-webhook review -); other objects are listed as 'not a pod'.",
        "kubectl kustomize deploy/base | netqos-webhook review - --fail-on skipped_explicit,invalid\n"
        "  netqos-webhook review deploy/examples/test-pod.yaml deploy/examples/latency-sensitive-deployment.yaml",
        _review,
    )
    p.add_argument("files", nargs="+", metavar="FILE|DIR|-", help="manifests to review")
    p.add_argument(
        "-o",
        "--output",
        choices=REVIEW_OUTPUTS,
        default=None,
        help="for one object of one file: response (default), the AdmissionReview answer; patch, the decoded "
        "JSON patch; pod, the mutated pod as YAML; workload, the workload with its mutated template. For "
        "several (or a directory): table (default), one row per object; json, one record per object; pod "
        "and workload, a YAML stream (workload: every object, pod templates mutated)",
    )
    _add_config(p)
    _add_webhook_namespace(p)
    p.add_argument(
        "--fail-on",
        type=_decisions,
        default=frozenset(),
        metavar="DECISIONS",
        help=f"exit with code 3 when an object gets one of these comma-separated decisions: {', '.join(DECISIONS)}",
    )


def _decisions(text: str) -> frozenset[str]:
    chosen = frozenset(word.strip() for word in text.split(",") if word.strip())
    unknown = sorted(chosen - set(DECISIONS))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or repr(text)}: not a decision; choose from {', '.join(DECISIONS)}"
        )
    return chosen


def _review(args: argparse.Namespace) -> int:
    from webhook.commands import review

    return review.run(typed(review.ReviewArgs, args, files=tuple(args.files)))


# --- explain -----------------------------------------------------------------------------------


def _add_explain(sub: Any) -> None:
    from webhook.commands import explain
    from webhook.names import DEFAULT_NETQOS_WEIGHT

    p = _command(sub, "explain", explain.HELP, explain.EXAMPLE, _explain)
    p.description = explain.DESCRIPTION
    p.epilog = explain.EPILOG
    p.add_argument("--pod", required=True, metavar="FILE", help="the Pod manifest (YAML or JSON) to explain")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--nodes",
        metavar="FILE",
        help="Node objects (YAML or JSON): one Node, several documents, or a List (kubectl get nodes -o yaml)",
    )
    _add_cluster(p, "read the nodes and pods from the cluster of ", exclusive=source)
    p.add_argument(
        "--pods",
        metavar="FILE",
        help="the pods already on the nodes: Pods, or a List (kubectl get pods -A -o yaml); pods not bound to a "
        "listed node, Succeeded or Failed are ignored (default: none with --nodes, the cluster's otherwise)",
    )
    p.add_argument(
        "--scheduler-config",
        metavar="FILE",
        help="a KubeSchedulerConfiguration (v1): the profile of the pod's schedulerName (default: the default profile)",
    )
    _number(
        p,
        "--netqos-weight",
        1,
        100,
        None,
        "the NetQoS plugin's weight in the NetQoS scheduler's profile; default: the policy's "
        f"schedulerWeights.netqos ({DEFAULT_NETQOS_WEIGHT} unless set)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format (default: table)")
    _add_config(p)
    _add_webhook_namespace(p)


def _explain(args: argparse.Namespace) -> int:
    from webhook.commands import explain

    return explain.run(typed(explain.ExplainArgs, args))


# --- manifests ---------------------------------------------------------------------------------


def _add_manifests(sub: Any) -> None:
    p = _command(
        sub,
        "manifests",
        "Print the MutatingWebhookConfiguration for a policy: one webhook entry per rule, each with that "
        "rule's podSelector as objectSelector. deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml "
        "is this output for deploy/base/policy.yaml. With --as admission-policy: the same mutation as "
        "MutatingAdmissionPolicies the API server runs itself (Kubernetes 1.36+), no webhook server.",
        "netqos-webhook manifests --config deploy/base/policy.yaml --ca-bundle certs/ca.crt | kubectl apply -f -",
        _manifests,
    )
    _add_config(p)
    p.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help=f"namespace of the webhook's Service, also excluded from mutation (default {DEFAULT_NAMESPACE})",
    )
    p.add_argument(
        "--url",
        metavar="URL",
        help="call the webhook at this https URL instead of the in-cluster Service (out-of-cluster "
        "development), e.g. https://host.minikube.internal:8443/mutate",
    )
    p.add_argument(
        "--ca-bundle",
        type=Path,
        metavar="FILE",
        help="PEM CA certificate(s) the API server trusts for the webhook (e.g. certs/ca.crt); "
        "without it caBundle is left out, for 'register' or cert-manager to fill in",
    )
    p.add_argument(
        "--as",
        dest="form",
        choices=MANIFEST_FORMS,
        default=MANIFEST_FORMS[0],
        help="webhook: the MutatingWebhookConfiguration (the default); admission-policy: per rule a "
        "MutatingAdmissionPolicy and its binding, which the API server runs itself (Kubernetes 1.36+, no "
        "webhook server; docs/operations.md, 'Webhook or admission policy')",
    )
    p.add_argument(
        "--warnings",
        action="store_true",
        help="with --as admission-policy: also a warn-only ValidatingAdmissionPolicy per rule and its binding, "
        "which carry the webhook's warnings to kubectl",
    )
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="output format (default yaml)")


def _manifests(args: argparse.Namespace) -> int:
    from webhook.commands import manifests

    return manifests.run(typed(manifests.ManifestsArgs, args))


# --- register ----------------------------------------------------------------------------------


def _add_register(sub: Any) -> None:
    p = _command(
        sub,
        "register",
        "Create or update the webhook's TLS Secret and its MutatingWebhookConfiguration (with the caBundle) in "
        "a cluster, by server-side apply: only the fields netqos-webhook owns are changed. Without "
        "certificates in --certs, new ones are generated there first (a 10-year CA, a 1-year server certificate; "
        "not with --dry-run). With ca-bundle.crt in --certs (after 'certs --new-ca') the caBundle is that file.",
        "netqos-webhook register --context minikube --config deploy/base/policy.yaml --certs certs",
        _register,
    )
    _add_cluster(p, "change the cluster of ")
    p.add_argument(
        "--namespace",
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help=f"namespace of the webhook (its Service and the TLS Secret; default {DEFAULT_NAMESPACE})",
    )
    p.add_argument(
        "--certs",
        type=Path,
        default=DEV_CERT_DIR,
        metavar="DIR",
        help=f"directory with ca.crt, tls.crt, tls.key from 'netqos-webhook certs' (default {DEV_CERT_DIR}/)",
    )
    _add_config(p)
    p.add_argument(
        "--url",
        metavar="URL",
        help="register a webhook served outside the cluster at this https URL (no Secret is sent), "
        "e.g. https://host.minikube.internal:8443/mutate",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the objects it would send (YAML) and change nothing: no request to the cluster and no "
        "certificate generated (make them first with 'netqos-webhook certs')",
    )


def _register(args: argparse.Namespace) -> int:
    from webhook.commands import register

    return register.run(typed(register.RegisterArgs, args))


# --- status ------------------------------------------------------------------------------------


def _add_status(sub: Any) -> None:
    p = _command(
        sub,
        "status",
        "Check, read-only, that a cluster carries out NetQoS: the webhook's registration, certificate and "
        "endpoints; which selected pods carry the preference (and which were created without it); whether "
        "they run on net=high nodes, and if not, why. Exit code 0 when all is well, 3 when there are "
        "problems or pods missing the preference, 1 when the cluster fails, 2 for unusable input.",
        "netqos-webhook status --context prod -o json",
        _status,
    )
    _add_cluster(p, "read the cluster of ")
    p.add_argument(
        "--webhook-namespace",
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help=f"namespace the webhook runs in (default {DEFAULT_NAMESPACE})",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="judge by this policy file instead of the one the installed webhook serves (its ConfigMap)",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", metavar="NS", help="only the pods of this namespace")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="the pods of every namespace (default)")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format (default table)")


def _status(args: argparse.Namespace) -> int:
    from webhook.commands import status

    return status.run(typed(status.StatusArgs, args), sys.stdout)


# --- rebalance ---------------------------------------------------------------------------------

MAX_EVICTIONS = 1000  # per run: the point of a run is a few moves the budgets can absorb
MAX_REPLICAS = 100_000


def _duration(text: str) -> dt.timedelta:
    """A Go-style duration (kubectl's --timeout, the descheduler's minPodAge): 10m, 1h30m, 90s, 0."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", text)
    if text == "0":
        return dt.timedelta(0)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 10m, 1h30m, 90s)")
    unit = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return dt.timedelta(seconds=sum(float(n) * unit[u] for n, u in parts))


def _add_rebalance(sub: Any) -> None:
    p = _command(
        sub,
        "rebalance",
        "Move latency-sensitive pods that run on slower nodes back to net=high nodes that have room now. "
        "Plans, for each such pod in turn (longest on a slow node first), the net=high node its replacement "
        "fits and kube-scheduler would pick, reserving room for every planned pod; skips, with the reason, "
        "pods that must not be evicted (among them system-critical pods, and pods whose replacement the live "
        "registration would not send to the webhook). With --apply, evicts through the Eviction API, so "
        "PodDisruptionBudgets hold; without an active registration it evicts nothing. Exit code 0 when nothing "
        "movable is left, 3 when movable pods remain or no registration is active, 1 when the cluster (or an "
        "eviction) fails, 2 for unusable input.",
        "netqos-webhook rebalance --context prod            # the plan; nothing is evicted\n"
        "  netqos-webhook rebalance --context prod --apply    # evict the first planned pod",
        _rebalance,
    )
    _add_cluster(p, "rebalance the cluster of ")
    p.add_argument(
        "--webhook-namespace",
        default=DEFAULT_NAMESPACE,
        metavar="NS",
        help=f"namespace the webhook runs in: its policy is read from there (default {DEFAULT_NAMESPACE})",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="plan by this policy file instead of the one the installed webhook serves (its ConfigMap)",
    )
    p.add_argument("-o", "--output", choices=("table", "json"), default="table", help="output format (default table)")
    p.add_argument(
        "--apply",
        action="store_true",
        help="evict the planned pods (at most --max-evictions); without it nothing is written to the cluster",
    )
    _number(p, "--max-evictions", 1, MAX_EVICTIONS, 1, "evict at most N pods in one run")
    _number(p, "--min-replicas", 0, MAX_REPLICAS, 2, "never evict a pod whose controller has fewer than N ready pods")
    p.add_argument(
        "--min-age",
        type=_duration,
        default=dt.timedelta(minutes=10),
        metavar="DURATION",
        help="never evict a pod younger than this (default 10m; e.g. 1h, 90s, 0)",
    )
    p.add_argument(
        "--include-local-storage",
        action="store_true",
        help="also evict pods with emptyDir or hostPath volumes (their data is lost)",
    )
    _number(
        p,
        "--movable-exit-code",
        0,
        255,
        3,
        "exit code when movable pods remain (a CronJob that moves a few pods per run passes 0)",
        "CODE",
    )


def _rebalance(args: argparse.Namespace) -> int:
    from webhook.commands import rebalance

    return rebalance.run(typed(rebalance.RebalanceArgs, args), sys.stdout)
