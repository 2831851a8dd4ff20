"""The `netqos-webhook` command: the root parser, dispatch, exit codes and signals.

Each command lives in `webhook.commands.<name>` with its flags beside its arguments
(`add_command`) and one entry point, `run(args, out)`; the flags commands share are
`webhook.commands.flags`. Every failure a user can cause is a `webhook.errors.NetqosError`,
printed here as one line with its exit code (`webhook.errors`: 0 success, 1 a failure at run
time, 2 bad usage or unusable input, 3 problems found). A closed stdout (`| head`) ends the
command quietly, as SIGPIPE ends other Unix tools (141); Ctrl-C ends it with 130.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from webhook import __version__
from webhook.commands import certs, explain, manifests, monitor, rebalance, register, review, serve, status
from webhook.errors import EXIT_USAGE, NetqosError

# In the order `netqos-webhook --help` lists them.
COMMANDS = (serve, review, certs, explain, manifests, register, status, rebalance, monitor)
PROG = "netqos-webhook"
KUBECTL_PLUGIN = "kubectl netqos"  # the console script kubectl-netqos, run by kubectl as a plugin
# kubectl's global flags that take a value, as users write them before the command too
# (`kubectl netqos -n shop explain pod/api`): each cluster command takes them after its name.
KUBECTL_GLOBALS = ("--context", "--kubeconfig", "--namespace", "-n")
EXIT_INTERRUPTED = 128 + signal.SIGINT
EXIT_CLOSED_STDOUT = 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    try:
        return _run(argv, prog)
    except BrokenPipeError:
        # The reader went away (`| head`): nothing left to say. Point stdout at /dev/null so the
        # interpreter's own flush at exit finds nothing to complain about.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_CLOSED_STDOUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED


def _run(argv: Sequence[str] | None, prog: str) -> int:
    parser = build_parser(prog)
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # said by the command's own parser, whose --help lists what it takes
            _command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit:
        sys.stdout.flush()  # --help, --version: a closed pipe shows here, not at exit
        raise
    try:
        code: int = args.main(args, sys.stdout)
    except NetqosError as err:
        print(f"{prog} {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    sys.stdout.flush()
    return code


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """`kubectl netqos COMMAND ...`: kubectl finds `kubectl-netqos` on the PATH and runs it with
    the arguments after `netqos`, unchanged (kubectl refuses flags placed before a plugin's name).
    kubectl's global flags given before the command are moved after it (`kubectl_argv`); the help
    and the errors name the program `kubectl netqos`."""
    return main(kubectl_argv(sys.argv[1:] if argv is None else argv), prog=KUBECTL_PLUGIN)


def kubectl_argv(argv: Sequence[str]) -> list[str]:
    """`argv` with the kubectl global flags (KUBECTL_GLOBALS: `--context NAME`, `--context=NAME`,
    `-n NS`, `-nNS`, ...) that precede the command moved to just after it, where the command's
    own parser reads them; anything else before the command (--help, --version) stops the search."""
    globals_: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name = word.split("=", 1)[0]
        if name in KUBECTL_GLOBALS and "=" not in word and i + 1 < len(argv):
            globals_ += argv[i : i + 2]
            i += 2
        elif name in KUBECTL_GLOBALS or (word.startswith("-n") and not word.startswith("--") and len(word) > 2):
            globals_.append(word)
            i += 1
        else:
            break
    if i == len(argv) or not globals_:
        return list(argv)
    return [argv[i], *globals_, *argv[i + 1 :]]


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one command (`netqos-webhook COMMAND`)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[command]
    return found


class _Parser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (the usage is one --help away); the commands'
    parsers are of this class too (argparse makes subparsers of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see '{self.prog} --help')\n")


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = _Parser(
        prog=prog,
        description="A mutating admission webhook that turns the pod label qos=latency-sensitive into "
        "preferred node affinity for net=high nodes, so the stock kube-scheduler scores nodes as the "
        "NetQoS scheduler plugin did (net=high 100, unlabelled 10, net=low 0).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'netqos-webhook COMMAND --help' for a command's options and an example.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_command(sub)
    return parser
