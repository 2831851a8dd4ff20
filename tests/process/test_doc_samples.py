"""Every block of command output the docs show is what the command prints, byte for byte.

A sample is marked in its document by a line `<!-- output: NAME -->` just before the block (an
indented block, or a fenced one); the block's first line is `$ COMMAND` as a user types it, the
rest what the terminal then shows (stdout and stderr, in order). The table below names each
sample with the command it shows and the exit code that command ends with: the test runs the
command from the repository's root on the fixtures it names (`netqos-webhook` is this checkout's
CLI, however the doc spells its path) and compares. A marker the table does not know, or a row
whose marker is gone, fails too, so no sample is left unchecked. The `status` sample of
docs/commands.md needs a cluster and is checked against a scripted API server in
tests/process/test_status.py. docs/architecture.md quotes pyproject.toml's import contracts; the
last test here holds the quotes to the contracts.

When a test here fails, the message is the block as it is now: paste it into the document.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures import REPO

MARKER = re.compile(r"^<!-- output: (?P<name>[a-z0-9-]+) -->$", re.MULTILINE)
DOCS = (
    "README.md",
    "docs/commands.md",
    "docs/policy.md",
    "docs/install.md",
    "docs/operations.md",
    "docs/performance.md",
    "docs/real-nodes.md",
    "docs/scheduling.md",
    "docs/development.md",
)
EXPLAIN = "netqos-webhook explain --pod"
FULL = "deploy/examples/full-cluster"


@dataclass(frozen=True)
class Sample:
    doc: str
    name: str  # the marker's NAME
    command: str  # as the block's `$` line shows it
    exit_code: int = 0
    needs: str | None = None  # a program the command pipes from, skipped without it


SAMPLES = [
    Sample("docs/commands.md", "review-text", "netqos-webhook review deploy/examples/test-pod.yaml"),
    Sample(
        "docs/commands.md",
        "review-base",
        "kubectl kustomize deploy/base | .venv/bin/netqos-webhook review - --fail-on skipped_explicit,invalid",
        needs="kubectl",
    ),
    Sample(
        "docs/policy.md",
        "policy-configmap",
        "netqos-webhook review --config tests/fixtures/docs/policy-configmap.yaml deploy/examples/test-pod.yaml",
        2,
    ),
    Sample(
        "docs/policy.md",
        "policy-unlisted-15",
        "netqos-webhook serve --config tests/fixtures/docs/policy-unlisted-15.yaml",
        2,
    ),
    Sample(
        "docs/policy.md",
        "policy-weight-500",
        "netqos-webhook serve --config tests/fixtures/docs/policy-weight-500.yaml",
        2,
    ),
    Sample(
        "docs/scheduling.md",
        "explain-no-tolerations",
        f"{EXPLAIN} tests/fixtures/explain/qos-demo-pod-no-tolerations.yaml --nodes deploy/examples/nodes.yaml",
    ),
    Sample(
        "docs/scheduling.md",
        "explain-experiment",
        f"{EXPLAIN} deploy/examples/test-pod.yaml --nodes deploy/examples/nodes.yaml",
    ),
    Sample(
        "docs/scheduling.md",
        "explain-full-node",
        f"{EXPLAIN} {FULL}/pod.yaml --nodes {FULL}/nodes.yaml --pods {FULL}/pods.yaml",
    ),
    Sample(
        "docs/scheduling.md",
        "explain-fast-node-free",
        f"{EXPLAIN} {FULL}/pod.yaml --nodes {FULL}/nodes.yaml --pods {FULL}/pods-fast-node-free.yaml",
    ),
]


def block_after(text: str, name: str) -> str:
    """The block that follows `<!-- output: NAME -->`: a fenced block's lines, or an indented
    block's lines less their four spaces."""
    marker = f"<!-- output: {name} -->\n"
    assert text.count(marker) == 1, f"{marker.strip()} should stand once"
    lines = text.split(marker, 1)[1].splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].startswith("```"):
        return "".join(line + "\n" for line in lines[1 : lines.index("```", 1)])
    block: list[str] = []
    for line in lines:
        if line.startswith("    ") or (not line.strip() and block):
            block.append(line[4:])
        else:
            break
    while block and not block[-1].strip():
        block.pop()
    return "".join(line + "\n" for line in block)


def shown(command: str) -> tuple[str, int]:
    """What a terminal shows for `$ command` run at the repository's root, and the exit code."""
    script = 'netqos-webhook() { "$NETQOS_PYTHON" -m webhook "$@"; }\n' + command.replace(
        ".venv/bin/netqos-webhook", "netqos-webhook"
    )
    env = {**os.environ, "NETQOS_PYTHON": sys.executable, "PYTHONUNBUFFERED": "1"}  # stdout and stderr in order
    done = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120
    )
    return f"$ {command}\n" + done.stdout.decode(), done.returncode


@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{s.doc}:{s.name}" for s in SAMPLES])
def test_the_sample_is_what_the_command_prints(sample: Sample, tmp_path: Path) -> None:
    if sample.needs and shutil.which(sample.needs) is None:
        pytest.skip(f"{sample.needs} is not installed")
    documented = block_after((REPO / sample.doc).read_text(), sample.name)
    assert documented.startswith(f"$ {sample.command}\n"), f"{sample.doc}: the sample shows another command"
    output, code = shown(sample.command)
    assert code == sample.exit_code, output
    assert documented == output, f"{sample.doc}'s sample {sample.name} is stale; it is now:\n{output}"


def test_every_marked_sample_is_in_the_table() -> None:
    marked = {(doc, m["name"]) for doc in DOCS for m in MARKER.finditer((REPO / doc).read_text())}
    assert marked == {(s.doc, s.name) for s in SAMPLES}


# --- docs/architecture.md quotes the import contracts as pyproject.toml states them -------------

ARCHITECTURE = "docs/architecture.md"
CONTRACTS_HEADING = "## Import contracts\n"
CONTRACT = "[[tool.importlinter.contracts]]"


def quoted_contracts(pyproject: str) -> str:
    """Each contract of pyproject.toml as docs/architecture.md quotes it: its name as a `###`
    heading, then its settings as a ```toml block, verbatim but for comments, blank lines and the
    guidance for whoever breaks it."""
    quotes = []
    for contract in pyproject.split(CONTRACT)[1:]:
        contract = contract.split("\n[", 1)[0]  # up to the next table
        contract = re.sub(r'^broken_contract_guidance = """.*?"""\n', "", contract, flags=re.MULTILINE | re.DOTALL)
        lines = [line for line in contract.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        (name,) = [re.fullmatch(r'name = "(.*)"', line)[1] for line in lines if line.startswith("name = ")]
        settings = "\n".join(line for line in lines if not line.startswith("name = "))
        quotes.append(f"### {name}\n\n```toml\n{settings}\n```\n")
    return "\n".join(quotes)


def test_architecture_quotes_every_import_contract_as_pyproject_states_it() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    quoted = quoted_contracts(pyproject)
    assert [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", quoted, re.DOTALL)] == [
        {k: v for k, v in c.items() if k not in ("name", "broken_contract_guidance")}
        for c in tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]
    ], "the quotes lost a setting of a contract"
    doc = (REPO / ARCHITECTURE).read_text()
    assert CONTRACTS_HEADING in doc, f"{ARCHITECTURE} lacks its {CONTRACTS_HEADING.strip()} section"
    section = doc.split(CONTRACTS_HEADING, 1)[1]
    shown = section[section.index("### ") :]
    assert shown == quoted, f"{ARCHITECTURE}'s quotes of pyproject.toml's contracts are stale; they are now:\n{quoted}"
