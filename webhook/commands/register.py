"""`netqos-webhook register`: the TLS Secret and the webhook configuration, into a cluster."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from webhook.errors import RuntimeFailure
from webhook.names import DEFAULT_NAMESPACE, DEV_CERT_DIR


@dataclass(frozen=True)
class RegisterArgs:
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    certs: Path = DEV_CERT_DIR
    config: str | None = None
    url: str | None = None
    dry_run: bool = False


def run(args: RegisterArgs) -> int:
    from webhook.certs import CertFiles, generate
    from webhook.cluster import apply, connect, describe
    from webhook.manifests import check_namespace, check_url
    from webhook.policy_file import load_policy
    from webhook.register import check_certificates, objects

    policy = load_policy(args.config)
    check_namespace(args.namespace)
    if args.url is not None:
        check_url(args.url)
    # The cluster's credentials before anything is written: a kubeconfig that cannot be used
    # leaves no certificates behind. ClusterError: exit 2 for the kubeconfig, else 1.
    cluster = None if args.dry_run else connect(args.kubeconfig, args.context)
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
        print(yaml.safe_dump_all(objs, sort_keys=False), end="")
        if any(o["kind"] == "Secret" for o in objs):
            print(f"(dry run: nothing sent; the Secret above holds the private key from {files.key})", file=sys.stderr)
        return 0
    apply(cluster, objs)
    for obj in objs:
        if obj["kind"] == "MutatingWebhookConfiguration":
            entries = ", ".join(w["name"] for w in obj["webhooks"])
            print(f"registered {describe(obj)}: webhooks {entries}", file=sys.stderr)
    return 0
