"""`netqos-webhook register`: the TLS Secret and the webhook configuration, into a cluster."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

import yaml

from webhook.commands import flags, typed
from webhook.errors import RuntimeFailure
from webhook.names import DEFAULT_NAMESPACE, DEV_CERT_DIR

HELP = (
    "Create or update the webhook's TLS Secret and its MutatingWebhookConfiguration (with the caBundle) in "
    "a cluster, by server-side apply: only the fields netqos-webhook owns are changed. Without "
    "certificates in --certs, new ones are generated there first (a 10-year CA, a 1-year server certificate; "
    "not with --dry-run). With ca-bundle.crt in --certs (after 'certs --new-ca') the caBundle is that file."
)
EXAMPLE = "netqos-webhook register --context minikube --config deploy/base/policy.yaml --certs certs"


@dataclass(frozen=True)
class RegisterArgs:
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    certs: Path = DEV_CERT_DIR
    config: str | None = None
    url: str | None = None
    dry_run: bool = False


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "register", HELP, EXAMPLE, _main)
    flags.cluster(p, "change the cluster of ")
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
    flags.config(p)
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


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(RegisterArgs, parsed), out)


def run(args: RegisterArgs, out: TextIO) -> int:
    from webhook.certs import CertFiles, generate
    from webhook.cluster import apply, check_api_server, connect, describe
    from webhook.manifests import check_namespace, check_url
    from webhook.policy_file import load_policy
    from webhook.register import check_certificates, objects

    policy = load_policy(args.config)
    check_namespace(args.namespace)
    if args.url is not None:
        check_url(args.url)
    # The cluster's credentials before anything is written: a kubeconfig that cannot be used, or
    # whose server is no Kubernetes API server, leaves no certificates behind. ClusterError: exit 2
    # for the kubeconfig, else 1.
    cluster = None if args.dry_run else connect(args.kubeconfig, args.context)
    if cluster is not None:
        check_api_server(cluster)
    files = CertFiles(args.certs)
    none_there = not any(p.exists() for p in (files.ca_cert, files.ca_key, files.cert, files.key))
    if none_there and cluster is not None:  # --dry-run makes nothing
        hosts = [urlsplit(args.url).hostname or ""] if args.url else []
        try:
            generate(files.directory, namespace=args.namespace, hosts=hosts)
        except OSError as err:
            raise RuntimeFailure(f"cannot write certificates into {files.directory}: {err.strerror}") from None
        print(f"generated a CA and a server certificate in {files.directory}/", file=sys.stderr)
    certs = check_certificates(files, args.namespace, args.url)
    for warning in certs.warnings:  # --dry-run included: it is how a pipeline checks before it applies
        print(f"Warning: {warning}", file=sys.stderr)
    objs = objects(policy, certs, args.namespace, args.url)
    if cluster is None:  # --dry-run
        out.write(yaml.safe_dump_all(objs, sort_keys=False))
        if any(o["kind"] == "Secret" for o in objs):
            print(f"(dry run: nothing sent; the Secret above holds the private key from {files.key})", file=sys.stderr)
        return 0
    apply(cluster, objs)
    for obj in objs:
        if obj["kind"] == "MutatingWebhookConfiguration":
            entries = ", ".join(w["name"] for w in obj["webhooks"])
            print(f"registered {describe(obj)}: webhooks {entries}", file=sys.stderr)
    return 0
