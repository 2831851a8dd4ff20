"""Every mistake a user can make on the command line: one line on stderr, no traceback, the
documented exit code (2 unusable input, 1 a failure at run time), through the real CLI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import REPO
from webhook.certs import generate
from webhook.commands.serve import check_bind
from webhook.errors import UsageError

POD = str(REPO / "deploy" / "examples" / "test-pod.yaml")
NODES = str(REPO / "deploy" / "examples" / "nodes.yaml")


def netqos(*args: str, stdin: str = "", cwd: Path | None = None, stdout: int | None = subprocess.PIPE):
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        input=stdin,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "", "KUBECONFIG": "/nonexistent/kubeconfig"},
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, str]:
    """Inputs the table refers to as {name}."""
    tmp = tmp_path_factory.mktemp("inputs")
    certs = generate(tmp / "certs")
    (tmp / "not-pem.txt").write_text("hello\n")
    (tmp / "bad.yaml").write_text("kind: Pod\nmetadata: [\n")
    (tmp / "empty-dir").mkdir()
    (tmp / "bad-workload.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w}\nspec: 5\n")
    (tmp / "a-file").write_text("")
    (tmp / "empty-one.yaml").write_text("---\n")
    (tmp / "empty-two.yaml").write_text("")
    # `kubectl get configmap -o yaml` of the webhook's policy, saved where the policy was meant
    (tmp / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: netqos-webhook-policy, namespace: netqos-system}\n"
        "data:\n  policy.yaml: |\n    rules: []\n"
    )
    return {
        "certs": str(certs.directory),
        "not_pem": str(tmp / "not-pem.txt"),
        "bad_yaml": str(tmp / "bad.yaml"),
        "empty_dir": str(tmp / "empty-dir"),
        "bad_workload": str(tmp / "bad-workload.yaml"),
        "file_as_dir": str(tmp / "a-file" / "certs"),
        "configmap": str(tmp / "configmap.yaml"),
        "empty_one": str(tmp / "empty-one.yaml"),
        "empty_two": str(tmp / "empty-two.yaml"),
        "pod": POD,
        "nodes": NODES,
    }


# command line, stdin, exit code, a fragment of the one line on stderr
CASES = [
    # the command line itself
    ("", "", 2, "the following arguments are required: COMMAND"),
    ("bogus", "", 2, "invalid choice: 'bogus'"),
    # serve: nothing starts
    ("serve --bind 127.0.0.1:99999", "", 2, "the port must be a number from 1 to 65535, got '99999'"),
    ("serve --bind 127.0.0.1:0", "", 2, "the port must be a number from 1 to 65535, got '0'"),
    ("serve --bind localhost", "", 2, "is not HOST:PORT"),
    ("serve --bind :abc", "", 2, "got 'abc'"),
    ("serve --bind ::1:8443", "", 2, "an IPv6 address goes in brackets"),
    ("serve --bind [zz::1]:8443", "", 2, "'zz::1' is not an IPv6 address"),
    ("serve --bind bad_host!:8443", "", 2, "'bad_host!' is not a host name or IP address"),
    ("serve --bind 999.1.1.1:8444", "", 2, "'999.1.1.1' is not an IPv4 address"),
    ("serve --workers 0", "", 2, "--workers: must be from 1 to 64, got 0"),
    ("serve --workers 1000000", "", 2, "--workers: must be from 1 to 64, got 1000000"),
    ("serve --max-body-bytes 4194304 --body-budget-bytes 4194304", "", 2, "give at least 8388608"),
    ("serve --threads 4", "", 2, "--threads is for --worker-class gthread only"),
    ("serve --certfile x.crt", "", 2, "--certfile and --keyfile go together"),
    ("serve --metrics-dir {not_pem}", "", 2, "--metrics-dir {not_pem} is not a directory"),
    ("serve --metrics-dir {file_as_dir}", "", 2, "--metrics-dir {file_as_dir}: cannot create it (Not a directory)"),
    ("serve --config no/such.yaml", "", 2, "policy file no/such.yaml: cannot read it"),
    ("serve --certfile {not_pem} --keyfile {not_pem}", "", 2, "re-create them with 'netqos-webhook certs'"),
    ("serve --certfile {certs}/tls.key --keyfile {certs}/tls.crt", "", 2, "the two are swapped"),
    ("serve --certfile {certs}/tls.crt --keyfile {certs}/ca.crt", "", 2, "/ca.crt holds no PEM private key"),
    ("serve --certfile {certs}/tls.key --keyfile {certs}/tls.key", "", 2, "/tls.key holds no PEM certificate"),
    ("serve --bogus", "", 2, "unrecognized arguments: --bogus (see 'netqos-webhook serve --help')"),
    ("certs --out x extra", "", 2, "unrecognized arguments: extra (see 'netqos-webhook certs --help')"),
    ("certs --out {not_pem}", "", 2, "--out {not_pem} is not a directory"),
    ("certs --out x --ca-days 10 --days 365", "", 2, "a CA of 10 days cannot sign a server certificate of 365"),
    ("serve --certfile {certs}/tls.crt --keyfile {certs}/tls.key --client-ca missing.crt", "", 2, "missing.crt"),
    # review
    ("review no/such/pod.yaml", "", 2, "input file no/such/pod.yaml: cannot read it"),
    ("review {bad_yaml}", "", 2, "input file {bad_yaml}: not valid YAML or JSON: line 3, column 1"),
    ("review -", "", 2, "input - holds no object"),
    # -o pod over objects none of which carries a pod: refused alike, one object or several
    ("review {configmap} -o pod", "", 2, "input file {configmap}: expected a Pod, an AdmissionReview or a workload"),
    ("review {configmap} {configmap} -o pod", "", 2, "-o pod prints pods; {configmap} and {configmap} hold none"),
    # two file names are listed as two, the verb agreeing
    ("review {empty_one} {empty_two}", "", 2, "input {empty_one} and {empty_two} hold no object; give a Pod"),
    ("review {pod} {pod} -o patch", "", 2, "one object of one file; {pod} and {pod} hold 2 objects: use -o table"),
    ("review {pod} {empty_one} {pod} -o response", "", 2, "; {pod}, {empty_one} and {pod} hold 2 objects: use"),
    ("review -", "- 1\n", 2, "is a list, not a Kubernetes object"),
    ("review -", "just text\n", 2, "is a string, not a Kubernetes object"),
    ("review -", "kind: Service\n", 2, "expected a Pod, an AdmissionReview or a workload"),
    ("review -", '{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', 2, "request must be an object"),
    ("review {bad_workload}", "", 2, "Deployment 'w': spec must be an object"),
    ("review {empty_dir}", "", 2, "directory {empty_dir} holds no .yaml, .yml, .json file"),
    ("review {pod} --fail-on sometimes", "", 2, "sometimes: not a decision"),
    ("review {pod} -o wide", "", 2, "invalid choice: 'wide'"),
    ("review {pod} --config {not_pem}", "", 2, "policy file {not_pem}"),
    (
        "review {pod} --config {configmap}",
        "",
        2,
        "policy file {configmap}: is a ConfigMap, not a policy: its key policy.yaml holds the policy; write the key"
        " to a file and pass that: kubectl -n netqos-system get configmap netqos-webhook-policy"
        " -o jsonpath='{{.data.policy\\.yaml}}' > policy.yaml; --config policy.yaml",
    ),
    ("serve --config {configmap}", "", 2, "is a ConfigMap, not a policy: its key policy.yaml holds the policy"),
    # certs
    ("certs --out {certs}", "", 2, "already holds a CA"),
    ("certs --out {empty_dir} --renew-before 30", "", 2, "renewing needs the CA"),
    ("certs --out {certs} --renew-before 30 --force", "", 2, "--renew-before keeps the CA"),
    ("certs --out {certs} --force --new-ca", "", 2, "not allowed with argument"),
    ("certs --out {file_as_dir}", "", 1, "cannot write certificates into {file_as_dir}"),
    ("certs --days 0 --out x", "", 2, "--days: must be from 1 to 36500, got 0"),
    ("certs --days 99999999999 --out x", "", 2, "--days: must be from 1 to 36500, got 99999999999"),
    ("certs --days 3000000 --out x", "", 2, "--days: must be from 1 to 36500, got 3000000"),
    # explain
    ("explain --pod no/such.yaml --nodes {nodes}", "", 2, "pod file no/such.yaml: cannot read it"),
    ("explain --pod {pod} --nodes {bad_yaml}", "", 2, "nodes file {bad_yaml}: not valid YAML or JSON"),
    ("explain --pod {pod} --kubeconfig /no/such/kubeconfig", "", 2, "/no/such/kubeconfig"),
    # manifests
    ("manifests --namespace Bad_NS", "", 2, "namespace 'Bad_NS' is not a valid namespace name"),
    ("manifests --url http://example.test/mutate", "", 2, "the scheme must be https"),
    ("manifests --ca-bundle no/such.crt", "", 2, "--ca-bundle file no/such.crt: cannot read it"),
    ("manifests --ca-bundle {not_pem}", "", 2, "holds no PEM certificate"),
    # register
    ("register --namespace Bad_NS --dry-run", "", 2, "is not a valid namespace name"),
    ("register --certs {empty_dir} --dry-run", "", 2, "missing {empty_dir}/ca.crt"),
    ("register --certs {certs} --kubeconfig /no/such/kubeconfig", "", 2, "/no/such/kubeconfig"),
    ("register --certs {certs} --url http://x/mutate --dry-run", "", 2, "the scheme must be https"),
    ("register --certs {certs} --url https://x:8443/validate --dry-run", "", 2, "the path must be /mutate"),
    ("register --certs {certs} --url https://x:0/mutate --dry-run", "", 2, "port 0 is no port"),
]


@pytest.mark.parametrize("line, stdin, code, fragment", CASES, ids=[c[0] or "(nothing)" for c in CASES])
def test_a_users_mistake_is_one_line_and_the_documented_exit_code(files, tmp_path, line, stdin, code, fragment):
    done = netqos(*line.format(**files).split(), stdin=stdin, cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, done.stderr
    assert fragment.format(**files) in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "certs").exists(), "a refused serve generates nothing"


def test_a_directory_that_cannot_be_listed_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """As an unprivileged user sees a directory without read permission (the tests may run as
    root, whom permissions do not stop, so the refusal is the operating system's, staged)."""
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "pod.yaml").write_text(Path(POD).read_text())
    from webhook import documents

    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(documents.os, "scandir", refuse)
    from webhook.cli import main

    assert main(["review", str(tmp_path / "manifests")]) == 2
    err = capsys.readouterr().err
    directory = tmp_path / "manifests"
    assert err == (
        f"netqos-webhook review: input directory {directory}: cannot list it (Permission denied); "
        "check its permissions\n"
    )


def test_a_taken_port_is_a_runtime_failure_in_one_line(tmp_path, files):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = netqos(
            "serve",
            "--bind",
            f"127.0.0.1:{port}",
            "--certfile",
            f"{files['certs']}/tls.crt",
            "--keyfile",
            f"{files['certs']}/tls.key",
            cwd=tmp_path,
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"netqos-webhook serve: cannot listen on 127.0.0.1:{port}" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    "bind, host, port",
    [
        ("127.0.0.1:8443", "127.0.0.1", 8443),
        ("0.0.0.0:1", "0.0.0.0", 1),
        ("[::]:8443", "::", 8443),
        ("[::1]:65535", "::1", 65535),
        (":8443", "", 8443),
        ("localhost:8443", "localhost", 8443),
        ("webhook.netqos-system.svc:443", "webhook.netqos-system.svc", 443),
    ],
)
def test_bind_addresses_gunicorn_can_use_pass(bind, host, port):
    assert check_bind(bind) == (host, port)


@pytest.mark.parametrize(
    "bind", ["", "8443", "host:", "host:65536", "host:-1", "[::1]", "[::1]8443", "a b:1", "[1.2.3.4]:1"]
)
def test_bind_addresses_gunicorn_cannot_use_are_usage_errors(bind):
    with pytest.raises(UsageError):
        check_bind(bind)


@pytest.mark.parametrize(
    "args",
    [
        ["manifests"],
        ["review", POD],
        ["review", str(REPO / "deploy" / "examples")],
        ["explain", "--pod", POD, "--nodes", NODES],
        ["certs", "--out", "{fresh}"],
        ["register", "--certs", "{certs}", "--dry-run"],
        ["--help"],
        ["serve", "--help"],
        ["--version"],
    ],
    ids=lambda a: " ".join(a),
)
def test_every_command_exits_quietly_when_stdout_is_closed(files, tmp_path, args):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone before the first byte, as `| head -0` leaves it
    try:
        argv = [a.format(fresh=tmp_path / "fresh", **files) for a in args]
        done = netqos(*argv, stdout=write_end, cwd=tmp_path)
    finally:
        os.close(write_end)
    for noise in ("Traceback", "BrokenPipe", "Exception ignored"):
        assert noise not in done.stderr, done.stderr
    assert done.returncode in (0, 141), done.stderr  # 141: ended by the closed pipe, as SIGPIPE ends Unix tools
