"""The flags several commands share, spelled and explained once: a command's module adds its own
flags beside its arguments and takes these for what they have in common (kubectl's vocabulary:
--kubeconfig, --context, -n/-A, -o; the policy file; the webhook's namespace; numbers with a
range, Go-style durations).

Light on purpose: `netqos-webhook --help` builds every command's parser, so this module (and
each command module's head) imports argparse and names, never what a command needs to run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from webhook.names import CONFIG_ENV, DEFAULT_NAMESPACE

# A command's entry point for the CLI: its parsed flags and stdout in, an exit code out.
Main = Callable[[argparse.Namespace, TextIO], int]
# argparse's `add_subparsers()` result: private in typeshed, so passed around untyped.
Subcommands = Any
Group = argparse.ArgumentParser | argparse._ArgumentGroup | argparse._MutuallyExclusiveGroup


def command(sub: Subcommands, name: str, help: str, example: str, main: Main) -> argparse.ArgumentParser:
    """The parser of `netqos-webhook NAME`: its help as description, an example as epilog; `main`
    runs it."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(main=main)
    return parser


def config(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """--config: the policy file. Without `help`, the file the webhook serves by (default
    $NETQOS_CONFIG); commands that read the installed webhook's policy say so in `help`, no default."""
    if help is not None:
        parser.add_argument("--config", metavar="FILE", help=help)
        return
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get(CONFIG_ENV) or None,
        help=f"policy file (YAML: the policy itself, not a ConfigMap holding it); default: ${CONFIG_ENV}, "
        "else the built-in NetQoS rule",
    )


def webhook_namespace(parser: argparse.ArgumentParser, help: str | None = None) -> None:
    """--webhook-namespace: where the webhook runs; `help` says what the command does with it,
    by default that pods there are never sent to the webhook (the commands that judge one pod)."""
    parser.add_argument(
        "--webhook-namespace",
        metavar="NS",
        default=DEFAULT_NAMESPACE,
        help=help
        or f"the namespace the webhook runs in (default {DEFAULT_NAMESPACE}): the registration excludes it and "
        "kube-system, so a pod created there is reported as not_called (the API server never calls the webhook)",
    )


@dataclass(frozen=True)
class ClusterArgs:
    """What every command that talks to a cluster is given to find it, as kubectl finds it: the
    kubeconfig (None: $KUBECONFIG, else ~/.kube/config, else the in-cluster service account) and
    its context (None: the current one). Each such command's arguments extend it; `cluster` below
    declares its flags. The namespace is not here: kubectl's -n names the pod to explain, the pods
    status counts, and register's --namespace the webhook's; each command says which."""

    kubeconfig: str | None = None
    context: str | None = None


def cluster(parser: argparse.ArgumentParser, purpose: str, exclusive: Group | None = None) -> None:
    """--kubeconfig and --context (`ClusterArgs`), for every command that talks to a cluster:
    `purpose` begins --kubeconfig's help ("read the cluster of "); `exclusive`, a group
    --kubeconfig belongs to."""
    (exclusive or parser).add_argument(
        "--kubeconfig",
        metavar="FILE",
        help=f"{purpose}this kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, "
        "else the in-cluster service account)",
    )
    parser.add_argument(
        "--context", metavar="NAME", help="kubeconfig context (default: the kubeconfig's current context)"
    )


def namespaces(parser: argparse.ArgumentParser, what: str) -> None:
    """kubectl's -n NS / -A, exclusive: `what` ("the pods") of one namespace or of all (the default)."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", metavar="NS", help=f"only {what} of this namespace")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help=f"{what} of every namespace (default)")


def scheduler_configs(parser: argparse.ArgumentParser, what: str) -> None:
    """--scheduler-config FILE, repeatable: the cluster's KubeSchedulerConfigurations, by whose
    profiles the pods of their schedulers are judged; `what` ends the help's second sentence
    ("is predicted with ...", "is judged by ...") and says what happens without one."""
    parser.add_argument(
        "--scheduler-config",
        action="append",
        default=[],
        metavar="FILE",
        help=(
            "a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) of the cluster's scheduler(s); "
            f"repeatable. A pod whose spec.schedulerName is one of its profiles {what}"
        ),
    )


def output(parser: argparse.ArgumentParser, choices: Sequence[str], help: str) -> None:
    """-o/--output, its first choice the default."""
    parser.add_argument("-o", "--output", choices=choices, default=choices[0], help=help)


class Range:
    """An argparse type: a whole number from `low` to `high`. Every numeric flag has one, so a
    value that would fork a million workers or overflow a date is one line and exit code 2 before
    anything starts; `--help` and the flag table of docs/commands.md state it (the tests hold them to it).
    `fraction`: any number in the range (a probability), not only a whole one."""

    def __init__(self, low: int, high: int, fraction: bool = False) -> None:
        self.low, self.high, self.fraction = low, high, fraction

    def __call__(self, text: str) -> float:
        try:
            value = float(text) if self.fraction else int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {self._kind}") from None
        if not self.low <= value <= self.high:  # NaN is not within any range
            raise argparse.ArgumentTypeError(f"must be from {self.low} to {self.high}, got {text}")
        return value

    @property
    def _kind(self) -> str:
        return "a number" if self.fraction else "a whole number"

    def __repr__(self) -> str:  # argparse names the type in some messages
        return f"{self._kind} from {self.low} to {self.high}"


def number(
    parser: Group,
    flag: str,
    low: int,
    high: int,
    default: float | None,
    help: str,
    metavar: str = "N",
    fraction: bool = False,
) -> None:
    """A numeric flag, its range (and default) stated at the end of its help; `fraction`: any
    number in the range, not only a whole one."""
    shown = f"from {low} to {high}" + ("" if default is None else f"; default {default}")
    kind = Range(low, high, fraction)
    parser.add_argument(flag, type=kind, default=default, metavar=metavar, help=f"{help} ({shown})")


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_DURATION_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration(text: str) -> dt.timedelta:
    """An argparse type: a Go-style duration (kubectl's --timeout, the descheduler's minPodAge):
    10m, 1h30m, 90s, 0."""
    if text == "0":
        return dt.timedelta(0)
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 10m, 1h30m, 90s)")
    return dt.timedelta(seconds=sum(float(n) * _DURATION_UNIT[u] for n, u in parts))
