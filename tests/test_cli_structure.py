"""The command line's structure: light --help, one error hierarchy, shared names in one place."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from webhook import errors
from webhook.certs import RenewError
from webhook.cluster import ClusterError, KubeconfigError
from webhook.documents import DocumentError
from webhook.explain import ExplainError
from webhook.manifests import ManifestError
from webhook.policy_file import PolicyError
from webhook.register import CertificateError

COMMANDS = ["serve", "review", "certs", "explain", "manifests", "register"]
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
    from webhook.server import BindError

    assert issubclass(BindError, errors.NetqosError) and BindError("taken").exit_code == 1
