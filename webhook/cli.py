"""The `netqos-webhook` command: argument parsing and wiring, nothing else.

Exit codes: 0 success; 2 bad usage or unusable input (a file that cannot be read or parsed, an
invalid policy); 1 a failure at run time.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from webhook import __version__

EXIT_RUNTIME = 1
EXIT_USAGE = 2
CONFIG_ENV = "NETQOS_CONFIG"
DEV_CERT_DIR = Path("certs")


class CommandError(Exception):
    """A failure to report as one line on stderr, with an exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args) or 0
    except CommandError as err:
        print(f"netqos-webhook {args.command}: {err}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netqos-webhook",
        description="A mutating admission webhook that turns the pod label qos=latency-sensitive into "
        "preferred node affinity for net=high nodes, so the stock kube-scheduler scores nodes as the "
        "NetQoS plugin did (net=high 100, unlabelled 10, net=low 0).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'netqos-webhook COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_serve, _add_review, _add_certs, _add_explain, _add_manifests, _add_register):
        add(sub)
    return parser


def _command(
    sub: Any, name: str, help: str, example: str, handler: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    parser = sub.add_parser(
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


def _policy(args: argparse.Namespace):
    from webhook.policy_file import PolicyError, load_policy

    try:
        return load_policy(args.config)
    except PolicyError as err:
        raise CommandError(str(err)) from None


# --- serve -------------------------------------------------------------------------------------


def _add_serve(sub: Any) -> None:
    from webhook.server import (
        DEFAULT_BIND,
        DEFAULT_KEEPALIVE_SECONDS,
        DEFAULT_WORKERS,
        WORKER_CLASSES,
    )

    p = _command(
        sub,
        "serve",
        "Serve the webhook over HTTPS (gunicorn, TLS 1.2+).",
        "netqos-webhook serve --bind 0.0.0.0:8443 --certfile /tls/tls.crt --keyfile /tls/tls.key",
        _serve,
    )
    p.add_argument(
        "--bind", default=DEFAULT_BIND, metavar="HOST:PORT", help=f"address to listen on (default {DEFAULT_BIND})"
    )
    p.add_argument("--certfile", type=Path, metavar="FILE", help="server certificate (PEM); default certs/tls.crt")
    p.add_argument("--keyfile", type=Path, metavar="FILE", help="server private key (PEM); default certs/tls.key")
    _add_config(p)
    p.add_argument(
        "--workers",
        type=_positive,
        default=DEFAULT_WORKERS,
        metavar="N",
        help=f"worker processes (default {DEFAULT_WORKERS})",
    )
    p.add_argument(
        "--worker-class",
        choices=WORKER_CLASSES,
        default="gevent",
        help="gunicorn worker class (default gevent; see docs/performance.md)",
    )
    p.add_argument(
        "--threads", type=_positive, default=1, metavar="N", help="threads per worker, for --worker-class gthread only"
    )
    p.add_argument(
        "--keepalive",
        type=_positive,
        default=DEFAULT_KEEPALIVE_SECONDS,
        metavar="SECONDS",
        help=f"keep idle connections this long (default {DEFAULT_KEEPALIVE_SECONDS}; the API server keeps them 90 s)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=_positive,
        default=None,
        metavar="N",
        help="larger request bodies get 413 (default 8 MiB)",
    )
    p.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"), help="log level (default info)"
    )
    p.add_argument(
        "--log-format",
        default="json",
        choices=("json", "text"),
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
        default=os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None,
        help="writable directory for the workers' metric files, emptied at start "
        "(default: $PROMETHEUS_MULTIPROC_DIR, else a temporary directory)",
    )


def _serve(args: argparse.Namespace) -> int:
    from webhook import logs
    from webhook.app import DEFAULT_MAX_BODY_BYTES
    from webhook.policy_file import PolicyError
    from webhook.reload import PolicyWatcher, load_snapshot
    from webhook.server import BindError, ServeOptions, serve
    from webhook.tls import TLSFiles, check_files

    logs.configure(args.log_format, args.log_level)
    if (args.certfile is None) != (args.keyfile is None):
        raise CommandError("--certfile and --keyfile go together: give both, or neither to use certs/")
    try:
        snapshot = load_snapshot(args.config)
    except PolicyError as err:
        raise CommandError(str(err)) from None
    policy = snapshot.policy
    certfile, keyfile = args.certfile, args.keyfile
    if certfile is None:
        certfile, keyfile = _dev_certificate()
    for path in (certfile, keyfile, args.client_ca):
        if path is not None and not os.access(path, os.R_OK):
            raise CommandError(f"cannot read {path}; create it with 'netqos-webhook certs' or fix the path")
    problem = check_files(TLSFiles(certfile, keyfile, args.client_ca))
    if problem:
        raise CommandError(f"{problem}; fix the files or re-create them with 'netqos-webhook certs'")
    options = ServeOptions(
        certfile=certfile,
        keyfile=keyfile,
        bind=args.bind,
        workers=args.workers,
        worker_class=args.worker_class,
        threads=args.threads,
        keepalive=args.keepalive,
        max_body_bytes=args.max_body_bytes or DEFAULT_MAX_BODY_BYTES,
        log_level=args.log_level,
        log_format=args.log_format,
        client_ca=args.client_ca,
        metrics_dir=args.metrics_dir,
    )
    source = args.config or "the built-in default"
    logging.getLogger("webhook").info(
        "policy from %s: version %s, rules %s%s",
        source,
        snapshot.version,
        ", ".join(r.name for r in policy.rules),
        "; watching the file for changes" if args.config else "",
    )
    if args.client_ca:
        logging.getLogger("webhook").info("client certificates required, signed by %s", args.client_ca)
    try:
        serve(options, policy, PolicyWatcher(snapshot, args.config))
    except BindError as err:
        raise CommandError(str(err), EXIT_RUNTIME) from None
    return 0


def _dev_certificate() -> tuple[Path, Path]:
    from webhook.certs import DEV_HOSTS, CertFiles, generate

    files = CertFiles(DEV_CERT_DIR)
    if not (files.cert.exists() and files.key.exists()):
        generate(DEV_CERT_DIR, hosts=DEV_HOSTS)
        logging.getLogger("webhook").warning(
            "no --certfile/--keyfile and no %s: generated a development CA and certificate for %s "
            "and the in-cluster Service names in %s/ (trust %s)",
            files.cert,
            ", ".join(DEV_HOSTS),
            DEV_CERT_DIR,
            files.ca_cert,
        )
    return files.cert, files.key


# --- certs -------------------------------------------------------------------------------------


def _add_certs(sub: Any) -> None:
    from webhook.certs import DEFAULT_CA_DAYS, DEFAULT_NAMESPACE, DEFAULT_SERVICE, KEY_TYPES

    p = _command(
        sub,
        "certs",
        "Write a CA and a server certificate for the webhook's Service: ca.crt, ca.key, tls.crt, tls.key.",
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
    p.add_argument(
        "--days", type=_positive, default=365, metavar="N", help="server certificate validity in days (default 365)"
    )
    p.add_argument(
        "--ca-days",
        type=_positive,
        default=DEFAULT_CA_DAYS,
        metavar="N",
        help=f"CA validity in days (default {DEFAULT_CA_DAYS}): longer than the server certificate, so "
        "--renew-before can re-issue the latter under the same CA",
    )
    p.add_argument("--key-type", choices=KEY_TYPES, default="ecdsa", help="ecdsa (P-256, default) or rsa (2048)")
    p.add_argument(
        "--renew-before",
        type=_positive,
        metavar="DAYS",
        help="renew only: re-issue tls.crt/tls.key from the existing CA in --out when the certificate "
        "expires within DAYS (or is missing, or lacks a --host); leave a valid one alone. The CA "
        "is kept, so the webhook's caBundle stays the same",
    )


def _certs(args: argparse.Namespace) -> int:
    from webhook.certs import generate

    if args.renew_before is not None:
        return _renew(args)
    try:
        files = generate(args.out, args.service, args.namespace, args.host, args.days, args.key_type, args.ca_days)
    except OSError as err:
        raise CommandError(f"cannot write certificates into {args.out}: {err.strerror}", EXIT_RUNTIME) from None
    for path in (files.ca_cert, files.ca_key, files.cert, files.key):
        print(path)
    return 0


def _renew(args: argparse.Namespace) -> int:
    from webhook.certs import CertFiles, RenewError, renew

    try:
        done = renew(args.out, args.renew_before, args.days, args.host, args.key_type)
    except RenewError as err:
        raise CommandError(str(err)) from None
    except OSError as err:
        raise CommandError(f"cannot write certificates into {args.out}: {err.strerror}", EXIT_RUNTIME) from None
    cert = CertFiles(args.out).cert
    if done.renewed:
        print(
            f"renewed {cert} ({done.reason}): now valid until {done.not_after:%Y-%m-%d %H:%M}Z for {', '.join(done.names)}"
        )
    else:
        print(f"left {cert} alone: {done.reason}")
    return 0


# --- review ------------------------------------------------------------------------------------


def _add_review(sub: Any) -> None:
    p = _command(
        sub,
        "review",
        "Dry-run the webhook offline: FILE is a Pod manifest or a whole AdmissionReview (YAML or JSON; - reads stdin).",
        "netqos-webhook review deploy/examples/test-pod.yaml -o pod",
        _review,
    )
    p.add_argument("file", metavar="FILE|-", help="Pod manifest or AdmissionReview")
    p.add_argument(
        "-o",
        "--output",
        choices=("response", "patch", "pod"),
        default="response",
        help="response: the AdmissionReview answer (default); patch: the decoded JSON patch; pod: the mutated pod as YAML",
    )
    _add_config(p)


def _review(args: argparse.Namespace) -> int:
    import jsonpatch

    from webhook.admission import BadReview, create_review, review, wire_patch

    document = _read_manifest(args.file)
    policy = _policy(args)
    if isinstance(document, dict) and document.get("kind") == "Pod":
        document = create_review(document, "netqos-webhook-review")
    elif not (isinstance(document, dict) and document.get("kind") == "AdmissionReview"):
        kind = document.get("kind") if isinstance(document, dict) else type(document).__name__
        raise CommandError(f"{args.file}: expected a Pod or an AdmissionReview, got kind {kind!r}")
    try:
        result = review(policy, document)
    except BadReview as err:
        raise CommandError(f"{args.file}: {err}") from None
    if args.output == "response":
        print(json.dumps(result.response, indent=2))
    else:
        ops = wire_patch(result.response)
        if args.output == "patch":
            print(json.dumps(ops, indent=2))
        else:  # apply what we would send, so the output proves the patch and not just the policy
            pod = jsonpatch.apply_patch(document["request"].get("object"), ops)
            print(yaml.safe_dump(pod, sort_keys=False), end="")
    for warning in result.response["response"].get("warnings", ()):
        print(f"Warning: {warning}", file=sys.stderr)
    return 0


def _read_manifest(name: str) -> Any:
    from webhook.documents import DocumentError, read_document

    try:
        return read_document(name, "input")
    except DocumentError as err:
        raise CommandError(str(err)) from None


# --- explain -----------------------------------------------------------------------------------


def _add_explain(sub: Any) -> None:
    from webhook import explain

    p = _command(sub, "explain", explain.HELP, explain.EXAMPLE, _explain)
    explain.add_arguments(p)
    _add_config(p)


def _explain(args: argparse.Namespace) -> int:
    from webhook import explain
    from webhook.cluster import ClusterError

    try:
        return explain.run(args, _policy(args))
    except explain.ExplainError as err:
        raise CommandError(str(err)) from None
    except ClusterError as err:  # 2 for a kubeconfig that cannot be used, else 1 (as register)
        raise CommandError(str(err), err.code) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# --- manifests ---------------------------------------------------------------------------------


def _add_manifests(sub: Any) -> None:
    from webhook.certs import DEFAULT_NAMESPACE

    p = _command(
        sub,
        "manifests",
        "Print the MutatingWebhookConfiguration for a policy: one webhook entry per rule, each with that "
        "rule's podSelector as objectSelector. deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml is this "
        "output for deploy/base/policy.yaml.",
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
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml", help="output format (default yaml)")


def _manifests(args: argparse.Namespace) -> int:
    from webhook.manifests import ManifestError, webhook_configuration

    policy = _policy(args)
    ca_bundle = _read_ca_bundle(args.ca_bundle) if args.ca_bundle is not None else None
    try:
        config = webhook_configuration(policy, namespace=args.namespace, url=args.url, ca_bundle=ca_bundle)
    except ManifestError as err:
        raise CommandError(str(err)) from None
    if args.output == "json":
        print(json.dumps(config, indent=2))
    else:
        print(f"# Generated by: {_manifests_command(args)}")
        print("# Do not edit by hand: change the policy and run that command again.")
        print(yaml.safe_dump(config, sort_keys=False), end="")
    return 0


def _manifests_command(args: argparse.Namespace) -> str:
    """The command line that reproduces this output, for the header of generated files."""
    from webhook.certs import DEFAULT_NAMESPACE

    words = ["netqos-webhook", "manifests"]
    if args.config:
        words += ["--config", str(args.config)]
    if args.namespace != DEFAULT_NAMESPACE:
        words += ["--namespace", args.namespace]
    if args.url:
        words += ["--url", args.url]
    if args.ca_bundle is not None:
        words += ["--ca-bundle", str(args.ca_bundle)]
    return " ".join(words)


def _read_ca_bundle(path: Path) -> bytes:
    from cryptography import x509

    try:
        data = path.read_bytes()
    except OSError as err:
        raise CommandError(f"cannot read --ca-bundle {path}: {err.strerror}") from None
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise CommandError(
            f"--ca-bundle {path} holds no PEM certificate; give the CA certificate, e.g. certs/ca.crt "
            "from 'netqos-webhook certs'"
        ) from None
    return data


# --- register ----------------------------------------------------------------------------------


def _add_register(sub: Any) -> None:
    from webhook.certs import DEFAULT_NAMESPACE

    p = _command(
        sub,
        "register",
        "Create or update the webhook's TLS Secret and its MutatingWebhookConfiguration (with the caBundle) in "
        "a cluster, by server-side apply: only the fields netqos-webhook owns are changed. Without "
        "certificates in --certs, new ones are generated there first.",
        "netqos-webhook register --context minikube --config deploy/base/policy.yaml --certs certs",
        _register,
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default $KUBECONFIG, else ~/.kube/config, else the in-cluster service account)",
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context (default: the current context)")
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
    p.add_argument("--dry-run", action="store_true", help="print the objects it would send (YAML) and change nothing")


def _register(args: argparse.Namespace) -> int:
    from webhook.certs import CertFiles, generate
    from webhook.cluster import ClusterError, apply, connect, describe
    from webhook.manifests import ManifestError, check_namespace, check_url
    from webhook.register import CertificateError, check_certificates, objects

    policy = _policy(args)
    try:
        check_namespace(args.namespace)
        if args.url is not None:
            check_url(args.url)
    except ManifestError as err:
        raise CommandError(str(err)) from None
    files = CertFiles(args.certs)
    none_there = not any(p.exists() for p in (files.ca_cert, files.ca_key, files.cert, files.key))
    if none_there and not args.dry_run:
        hosts = [urlsplit(args.url).hostname] if args.url else []
        try:
            generate(files.directory, namespace=args.namespace, hosts=hosts)
        except OSError as err:
            raise CommandError(
                f"cannot write certificates into {files.directory}: {err.strerror}", EXIT_RUNTIME
            ) from None
        print(f"generated a CA and a server certificate in {files.directory}/", file=sys.stderr)
    try:
        certs = check_certificates(files, args.namespace, args.url)
    except CertificateError as err:
        raise CommandError(str(err)) from None
    objs = objects(policy, certs, args.namespace, args.url)
    if args.dry_run:
        print(yaml.safe_dump_all(objs, sort_keys=False), end="")
        if any(o["kind"] == "Secret" for o in objs):
            print(f"(dry run: nothing sent; the Secret above holds the private key from {files.key})", file=sys.stderr)
        return 0
    try:
        apply(connect(args.kubeconfig, args.context), objs)
    except ClusterError as err:  # exit 2 for a kubeconfig that cannot be used, else 1
        raise CommandError(str(err), err.code) from None
    for obj in objs:
        if obj["kind"] == "MutatingWebhookConfiguration":
            print(
                f"registered {describe(obj)}: webhooks {', '.join(w['name'] for w in obj['webhooks'])}", file=sys.stderr
            )
    return 0
