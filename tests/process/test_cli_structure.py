"""The command line's structure: light --help, one error hierarchy, shared names in one place."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import subprocess
import sys

import pytest

from tests.fixtures import REPO
from webhook import errors
from webhook.certs import RenewError
from webhook.cli import build_parser, main
from webhook.cluster import ClusterError, KubeconfigError
from webhook.commands.flags import Range
from webhook.documents import DocumentError
from webhook.explain import ExplainError
from webhook.manifests import ManifestError
from webhook.policy_file import PolicyError
from webhook.register import CertificateError


def commands() -> list[str]:
    """Every command of the parser: a new one is covered by the tests below without a word here."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


COMMANDS = commands()
SERVER_STACK = ("gunicorn", "flask", "werkzeug", "gevent", "cryptography", "kubernetes", "prometheus_client")

# Runs --help inside one interpreter and reports which modules it had to import.
_PROBE = """
import contextlib, io, json, sys
from webhook.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("argv", [[], *[[c] for c in COMMANDS]], ids=lambda a: " ".join(a) or "top")
def test_help_imports_no_part_of_the_server_stack(argv):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv, "--help"], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert loaded.isdisjoint(SERVER_STACK), sorted(loaded & set(SERVER_STACK))


@pytest.mark.parametrize(
    "error, exit_code",
    [
        (PolicyError, 2),
        (DocumentError, 2),
        (RenewError, 2),
        (ManifestError, 2),
        (CertificateError, 2),
        (ExplainError, 2),
        (KubeconfigError, 2),
        (ClusterError, 1),
    ],
)
def test_every_command_error_belongs_to_the_one_hierarchy_with_its_exit_code(error, exit_code):
    assert issubclass(error, errors.NetqosError)
    assert error("message").exit_code == exit_code


def test_the_server_bind_error_is_a_runtime_failure():
    from webhook.serving.server import BindError

    assert issubclass(BindError, errors.NetqosError) and BindError("taken").exit_code == 1


# --- docs/commands.md's flag table is the parsers' flags -------------------------------------------

README = REPO / "docs/commands.md"
_ROW = re.compile(r"^\| `netqos-webhook (?P<command>[a-z]+)(?P<usage>[^`]*)` \|", re.MULTILINE)
_FLAG = re.compile(r"(?<![\w-])(--?[a-z][-a-z]*)")


def readme_usage() -> dict[str, set[str]]:
    return {m["command"]: set(_FLAG.findall(m["usage"])) for m in _ROW.finditer(README.read_text())}


def parser_flags() -> dict[str, list[tuple[str, ...]]]:
    """Each command's options, one tuple of spellings (e.g. ('-o', '--output')) per option."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {
        name: [tuple(a.option_strings) for a in parser._actions if a.option_strings and a.dest != "help"]
        for name, parser in sub.choices.items()
    }


def test_readme_has_one_command_table_row_per_command():
    assert sorted(readme_usage()) == sorted(parser_flags())


@pytest.mark.parametrize("command", sorted(parser_flags()))
def test_readme_command_table_lists_exactly_the_parsers_flags(command):
    listed = readme_usage()[command]
    options = parser_flags()[command]
    missing = [spellings for spellings in options if not listed & set(spellings)]
    unknown = sorted(flag for flag in listed if not any(flag in spellings for spellings in options))
    assert (missing, unknown) == ([], [])


def _arguments_class(command: str) -> type:
    module = importlib.import_module(f"webhook.commands.{command}")
    return next(v for k, v in vars(module).items() if k.endswith("Args") and dataclasses.is_dataclass(v))


@pytest.mark.parametrize("command", sorted(parser_flags()))
def test_every_field_of_a_commands_arguments_is_a_flag_of_its_parser(command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    dests = {a.dest for a in sub.choices[command]._actions}
    fields = {f.name for f in dataclasses.fields(_arguments_class(command))}
    renamed = {"hosts"} if command == "certs" else set()  # --host, repeatable, becomes a tuple
    assert fields - dests == renamed


# --- every numeric flag has a range, stated in --help and README, enforced before anything starts --


def ranged_flags() -> list[tuple[str, str, Range]]:
    """(command, flag, its Range) for every numeric flag of every command."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [
        (name, action.option_strings[-1], action.type)
        for name, parser in sub.choices.items()
        for action in parser._actions
        if isinstance(action.type, Range)
    ]


def numeric_flags() -> list[tuple[str, str]]:
    """(command, flag) for every flag that takes or defaults to a number: each must have a Range."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [
        (name, action.option_strings[-1])
        for name, parser in sub.choices.items()
        for action in parser._actions
        if action.option_strings and (action.type in (int, float) or type(action.default) in (int, float))
    ]


def test_every_numeric_flag_has_a_range():
    ranged = {(command, flag) for command, flag, _ in ranged_flags()}
    assert set(numeric_flags()) <= ranged
    assert ("serve", "--workers") in ranged and ("certs", "--renew-before") in ranged


@pytest.mark.parametrize("command, flag, bounds", ranged_flags(), ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_numeric_flags_range_is_stated_in_its_help_and_in_readmes_command_table(command, flag, bounds):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    (action,) = [a for a in sub.choices[command]._actions if flag in a.option_strings]
    assert f"from {bounds.low} to {bounds.high}" in action.help
    (row,) = [line for line in README.read_text().splitlines() if line.startswith(f"| `netqos-webhook {command} ")]
    described = row.split("` |", 1)[1]
    stated = re.search(rf"`{flag}`[^|]*?{bounds.low} to {bounds.high}", described)
    assert stated, f"README's {command} row states no range for {flag}"


@pytest.mark.parametrize("command, flag, bounds", ranged_flags(), ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_value_outside_a_numeric_flags_range_is_one_line_and_exit_code_2(command, flag, bounds, capsys):
    for value in (bounds.low - 1, bounds.high + 1, 10**30):
        with pytest.raises(SystemExit) as exit_:
            main([command, flag, str(value)])
        err = capsys.readouterr().err
        assert exit_.value.code == 2, err
        assert f"must be from {bounds.low} to {bounds.high}, got {value}" in err
        assert len(err.splitlines()) == 1 and f"'netqos-webhook {command} --help'" in err
