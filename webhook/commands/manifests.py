"""`netqos-webhook manifests`: print the MutatingWebhookConfiguration for a policy, or (`--as
admission-policy`) the MutatingAdmissionPolicies that do the same in the API server itself, in the
API the target Kubernetes version serves: `--kubernetes-version`, else the cluster's own (its
/version, read through `webhook.commands.clusterread`) with --kubeconfig/--context or a kubeconfig
in the environment, else the newest known."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import yaml

from webhook.commands import flags, typed
from webhook.errors import UsageError
from webhook.kubeversion import NEWEST, KubeVersion, parse
from webhook.names import DEFAULT_NAMESPACE

WEBHOOK = "webhook"
ADMISSION_POLICY = "admission-policy"
FORMS = (WEBHOOK, ADMISSION_POLICY)

HELP = (
    "Print the MutatingWebhookConfiguration for a policy: one webhook entry per rule, each with that "
    "rule's podSelector as objectSelector. deploy/base/webhook-configuration/mutatingwebhookconfiguration.yaml "
    "is this output for deploy/base/policy.yaml. With --as admission-policy: the same mutation as "
    "MutatingAdmissionPolicies the API server runs itself (Kubernetes 1.36+, or 1.34+ with the beta API: "
    "--kubernetes-version), no webhook server."
)
EXAMPLE = "netqos-webhook manifests --config deploy/base/policy.yaml --ca-bundle certs/ca.crt | kubectl apply -f -"


@dataclass(frozen=True)
class ManifestsArgs(flags.ClusterArgs):
    config: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    url: str | None = None
    ca_bundle: Path | None = None
    output: str = "yaml"
    form: str = WEBHOOK  # --as
    warnings: bool = False
    kubernetes_version: str | None = None  # --kubernetes-version: the cluster the objects are for


def target_version(args: ManifestsArgs, notes: list[str]) -> KubeVersion:
    """The Kubernetes version the objects are for: --kubernetes-version; else, for admission
    policies (whose API changed in 1.36), the cluster's /version when --kubeconfig or --context
    names one (its failure is the command's) or a kubeconfig is in the environment (its failure is a
    note: nothing asked for that cluster); else the newest known."""
    if args.kubernetes_version is not None:
        return parse(args.kubernetes_version)
    from webhook.commands import clusterread

    named = args.kubeconfig is not None or args.context is not None
    if args.form != ADMISSION_POLICY or not (named or clusterread.default_kubeconfig_exists()):
        return NEWEST

    try:
        with clusterread.reader(args) as reader:
            found = clusterread.server_version(reader)
    except clusterread.ClusterError as err:
        if named:
            raise
        notes.append(
            f"the objects are for Kubernetes {NEWEST}, the newest known (--kubernetes-version to choose): {err}"
        )
        return NEWEST
    if found.version is None:
        notes.append(f"the objects are for Kubernetes {NEWEST}, the newest known ({found.said})")
        return NEWEST
    notes.append(f"the objects are for Kubernetes {found.version}, the cluster's ({found.said})")
    return found.version


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "manifests", HELP, EXAMPLE, _main)
    flags.config(p)
    flags.cluster(
        p, "with --as admission-policy and no --kubernetes-version: the objects are for the version of the cluster of "
    )
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
        choices=FORMS,
        default=FORMS[0],
        help="webhook: the MutatingWebhookConfiguration (the default); admission-policy: per rule a "
        "MutatingAdmissionPolicy and its binding, which the API server runs itself (Kubernetes 1.34+, see "
        "--kubernetes-version; no webhook server; docs/operations.md, 'Webhook or admission policy')",
    )
    p.add_argument(
        "--warnings",
        action="store_true",
        help="with --as admission-policy: also a warn-only ValidatingAdmissionPolicy per rule and its binding, "
        "which carry the webhook's warnings to kubectl",
    )
    p.add_argument(
        "--kubernetes-version",
        metavar="V",
        help="the Kubernetes version the objects are for (default: with --as admission-policy, the cluster's own, "
        "its /version, with --kubeconfig/--context or a kubeconfig in $KUBECONFIG or ~/.kube/config; without "
        f"one, the newest known, {NEWEST}): with --as "
        "admission-policy, admissionregistration.k8s.io/v1 from 1.36, v1beta1 on 1.34 and 1.35 (the API server "
        "needs --feature-gates=MutatingAdmissionPolicy=true --runtime-config=admissionregistration.k8s.io/v1beta1=true "
        "there), refused before 1.34",
    )
    flags.output(p, ("yaml", "json"), "output format (default yaml)")


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    return run(typed(ManifestsArgs, parsed), out)


def run(args: ManifestsArgs, out: TextIO) -> int:
    from webhook.policy_file import load_policy

    check_args(args)
    read: list[str] = []
    version = target_version(args, read)
    for note in read:
        print(f"Note: {note}", file=sys.stderr)
    if read and args.kubernetes_version is None:  # the header's command line makes the same objects again
        args = dataclasses.replace(args, kubernetes_version=str(version))
    notes: list[str] = []
    if args.form == ADMISSION_POLICY:
        from webhook.admission_api import beta_note, mutating_api_version

        mutating_api_version(version)  # refuses a version without the API before anything is read
        notes = [n for n in (beta_note(version),) if n]
    policy = load_policy(args.config)
    from webhook.policy import policy_warnings

    for warning in policy_warnings(policy):
        print(f"Warning: policy {args.config or 'built-in'}: {warning}", file=sys.stderr)
    if args.form == ADMISSION_POLICY:
        from webhook.admission_api import for_version
        from webhook.admission_policy import admission_policies, left_to_webhook

        objects = for_version(admission_policies(policy, namespace=args.namespace, warnings=args.warnings), version)
        for note in left_to_webhook(policy):
            print(f"Note: {note}", file=sys.stderr)
    else:
        from webhook.manifests import webhook_configuration

        ca_bundle = read_ca_bundle(args.ca_bundle) if args.ca_bundle is not None else None
        objects = [webhook_configuration(policy, namespace=args.namespace, url=args.url, ca_bundle=ca_bundle)]
    if args.output == "json":
        document = objects[0] if len(objects) == 1 else {"apiVersion": "v1", "kind": "List", "items": objects}
        print(json.dumps(document, indent=2), file=out)
    else:
        print(f"# Generated by: {command_line(args)}", file=out)
        print("# Do not edit by hand: change the policy and run that command again.", file=out)
        for note in notes:
            print(f"# {note}", file=out)
        out.write(yaml.dump_all(objects, Dumper=_BlockDumper, sort_keys=False))
    return 0


def check_args(args: ManifestsArgs) -> None:
    """The flags that only make sense together, checked before anything is read."""
    if args.form not in FORMS:
        raise UsageError(f"--as {args.form!r} is not a known form; use one of {', '.join(FORMS)}")
    if args.form == WEBHOOK and args.warnings:
        raise UsageError(
            "--warnings adds the warn-only ValidatingAdmissionPolicy, which only --as admission-policy "
            "prints (the webhook sends its warnings itself)"
        )
    if args.form == ADMISSION_POLICY:
        for flag, value in (("--url", args.url), ("--ca-bundle", args.ca_bundle)):
            if value is not None:
                raise UsageError(
                    f"{flag} configures how the API server calls the webhook; --as admission-policy needs no "
                    "webhook server: leave it out"
                )


class _BlockDumper(yaml.SafeDumper):
    """YAML with multi-line strings (the policies' CEL) as literal blocks, readable in review."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_BlockDumper.add_representer(str, _represent_str)


def command_line(args: ManifestsArgs) -> str:
    """The command line that reproduces this output, for the header of generated files."""
    words = ["netqos-webhook", "manifests"]
    if args.form != WEBHOOK:
        words += ["--as", args.form]
    if args.warnings:
        words.append("--warnings")
    if args.kubernetes_version is not None:
        words += ["--kubernetes-version", args.kubernetes_version]
    if args.config:
        words += ["--config", str(args.config)]
    if args.namespace != DEFAULT_NAMESPACE:
        words += ["--namespace", args.namespace]
    if args.url:
        words += ["--url", args.url]
    if args.ca_bundle is not None:
        words += ["--ca-bundle", str(args.ca_bundle)]
    return " ".join(words)


def read_ca_bundle(path: Path) -> bytes:
    """The PEM certificates in `path`, checked to be at least one certificate."""
    from cryptography import x509

    from webhook.documents import OBJECT_LIMIT, read_bytes

    data = read_bytes(path, "--ca-bundle", UsageError, OBJECT_LIMIT)  # /dev/zero ends at 3 MiB
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        raise UsageError(
            f"--ca-bundle {path} holds no PEM certificate; give the CA certificate, e.g. certs/ca.crt "
            "from 'netqos-webhook certs'"
        ) from None
    return data
