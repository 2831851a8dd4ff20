"""`netqos-webhook register`: the TLS Secret and the webhook configuration, into a cluster."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar
from urllib.parse import urlsplit

import yaml

from webhook.commands import flags, typed
from webhook.errors import RuntimeFailure
from webhook.names import DEFAULT_NAMESPACE, DEV_CERT_DIR

if TYPE_CHECKING:  # what running needs (cryptography, the kubernetes client) loads only then
    from webhook.certs import CertFiles
    from webhook.cluster import Reader
    from webhook.policy import Policy
    from webhook.register import Certificates, HeldCAs
    from webhook.status import ObjectJSON, Read

Obj = TypeVar("Obj", bound="ObjectJSON")

HELP = (
    "Create or update the webhook's TLS Secret and its MutatingWebhookConfiguration (with the caBundle) in "
    "a cluster, by server-side apply: only the fields netqos-webhook owns are changed. The entries are the "
    "rules of the policy the installed webhook serves (its ConfigMap, read as 'status' reads it); a --config "
    "that differs from it is refused. A CA the cluster's Secret or caBundle holds is never replaced by one "
    "--certs does not hold (refused, exit 2; roll it over with 'certs --new-ca', or --force). Without "
    "certificates in --certs and without a CA in the cluster, new ones are generated there first (a 10-year "
    "CA, a 1-year server certificate; not with --dry-run). With ca-bundle.crt in --certs (after "
    "'certs --new-ca') the caBundle is that file."
)
EXAMPLE = "netqos-webhook register --context minikube --certs certs"


@dataclass(frozen=True)
class RegisterArgs(flags.ClusterArgs):
    namespace: str = DEFAULT_NAMESPACE
    certs: Path = DEV_CERT_DIR
    config: str | None = None
    url: str | None = None
    dry_run: bool = False
    force: bool = False


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
    flags.config(
        p,
        "the policy whose rules become the entries (default: the policy the installed webhook serves, its "
        "Deployment's --config ConfigMap; else, as with --url or --dry-run, the built-in NetQoS rule); refused when "
        "it differs from the installed one, unless --force",
    )
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
    p.add_argument(
        "--force",
        action="store_true",
        help="register even when it replaces what the cluster holds: a CA in the TLS Secret or the caBundle "
        "that --certs does not hold (pods created until every webhook pod serves the new certificate get no "
        "preference), or an installed policy --config differs from",
    )


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(RegisterArgs, parsed), out)


def run(args: RegisterArgs, out: TextIO) -> int:
    from webhook.certs import CertFiles
    from webhook.cluster import apply, check_api_server, describe
    from webhook.commands import clusterread
    from webhook.manifests import check_namespace, check_url
    from webhook.policy_file import load_policy
    from webhook.register import check_certificates, objects

    check_namespace(args.namespace)
    if args.url is not None:
        check_url(args.url)
    files = CertFiles(args.certs)
    if args.dry_run:  # no cluster: the policy given (or the built-in), the files as they are
        certs = check_certificates(files, args.namespace, args.url)
        _warn(certs.warnings)
        objs = objects(load_policy(args.config), certs, args.namespace, args.url)
        out.write(yaml.safe_dump_all(objs, sort_keys=False))
        if any(o["kind"] == "Secret" for o in objs):
            print(f"(dry run: nothing sent; the Secret above holds the private key from {files.key})", file=sys.stderr)
        return 0
    # The cluster's credentials before anything is written: a kubeconfig that cannot be used, or
    # whose server is no Kubernetes API server, leaves no certificates behind. ClusterError: exit 2
    # for the kubeconfig, else 1.
    with clusterread.reader(args) as reader:
        check_api_server(reader.cluster)
        held = _held(reader, args)
        policy, source = _policy(held, args.config, args.force)
        certs = _certificates(files, held, args)
        _warn(certs.warnings)
        objs = objects(policy, certs, args.namespace, args.url)
        apply(reader.cluster, objs)
    for obj in objs:
        if obj["kind"] == "MutatingWebhookConfiguration":
            entries = ", ".join(w["name"] for w in obj["webhooks"])
            print(f"registered {describe(obj)}: webhooks {entries}, the rules of {source}", file=sys.stderr)
    return 0


@dataclass(frozen=True)
class _Held:
    """What the cluster holds before register writes: the policy the webhook serves (None when
    it cannot be told, with why in `policy_from`) and the CAs of its Secret and registration."""

    policy: Policy | None
    policy_from: str
    cas: list[HeldCAs]


def _held(reader: Reader, args: RegisterArgs) -> _Held:
    """One read of what register could replace. With --url the webhook runs outside the cluster:
    there is no Deployment or Secret of ours to read, only the registration."""
    from webhook.commands.clusterread import get_object, policy_in_force
    from webhook.names import CONFIGURATION_NAME, TLS_SECRET
    from webhook.register import CAReplaced, cluster_cas
    from webhook.status import SecretJSON, Unknown, WebhookConfigurationJSON

    config = get_object(reader, "MutatingWebhookConfiguration", WebhookConfigurationJSON, CONFIGURATION_NAME)
    secret = None if args.url else get_object(reader, "Secret", SecretJSON, TLS_SECRET, args.namespace)
    for read in (config, secret):
        if isinstance(read, Unknown) and not args.force:
            raise CAReplaced(
                f"cannot read {read.what} (forbidden) to see which CA it holds; grant get on it, or pass "
                "--force to replace what it holds"
            )
    cas = cluster_cas(_known(secret), _known(config), args.namespace)
    if args.url:
        return _Held(None, "the webhook runs outside the cluster (--url)", cas)
    policy, where, problem = policy_in_force(reader, args.namespace, None, None)
    # Read from the cluster: a ConfigMap, or the built-in policy of a Deployment without
    # --config. The fallbacks say in parentheses why the cluster's could not be used.
    if problem is None and not where.endswith(")"):
        return _Held(policy, where, cas)
    return _Held(None, problem or where, cas)


def _known(read: Read[Obj]) -> Obj | None:
    from webhook.status import Unknown

    return None if isinstance(read, Unknown) else read


def _policy(held: _Held, config: str | None, force: bool) -> tuple[Policy, str]:
    """The policy to register and where it comes from: the installed policy, or --config when it
    agrees with it (or with --force); --config or the built-in one when the installed policy
    cannot be told (then the source says why)."""
    from webhook.policy_file import load_policy
    from webhook.register import check_policy_agrees

    if held.policy is None:
        return load_policy(config), f"{config or 'the built-in policy'} (not the installed one: {held.policy_from})"
    if config is None:
        return held.policy, held.policy_from
    given = load_policy(config)
    if not force:
        check_policy_agrees(held.policy, held.policy_from, given, config)
    return given, config


def _certificates(files: CertFiles, held: _Held, args: RegisterArgs) -> Certificates:
    """The files of --certs, checked; generated first when --certs holds none and the cluster
    holds no CA (or --force). A CA the cluster holds that they do not is refused (`check_ca_kept`)."""
    from webhook.certs import generate
    from webhook.register import check_ca_kept, check_certificates

    none_there = not any(p.exists() for p in (files.ca_cert, files.ca_key, files.cert, files.key))
    if none_there:
        if not args.force:
            check_ca_kept(held.cas, None, files.directory)
        hosts = [urlsplit(args.url).hostname or ""] if args.url else []
        try:
            generate(files.directory, namespace=args.namespace, hosts=hosts)
        except OSError as err:
            raise RuntimeFailure(f"cannot write certificates into {files.directory}: {err.strerror}") from None
        print(f"generated a CA and a server certificate in {files.directory}/", file=sys.stderr)
    certs = check_certificates(files, args.namespace, args.url)
    if not args.force:
        check_ca_kept(held.cas, certs.ca_bundle + certs.ca_cert, files.directory)
    return certs


def _warn(warnings: tuple[str, ...]) -> None:
    for warning in warnings:  # --dry-run included: it is how a pipeline checks before it applies
        print(f"Warning: {warning}", file=sys.stderr)
