"""The `netqos-webhook` command line, run as users run it."""

import json
import subprocess
import sys

import pytest
import yaml

from tests.fixtures import NETQOS_TERMS, REPO, fixture
from webhook.affinity import PREFERRED

TEST_POD = REPO / "deploy" / "examples" / "test-pod.yaml"


def run(*args, stdin=None, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_review_of_the_example_pod_says_for_a_person_what_the_webhook_adds():
    done = run("review", str(TEST_POD))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        f"Pod default/qos-demo-pod ({TEST_POD}): mutated by rule netqos\n"
        "  adds preferred node affinity (weight: terms):\n"
        "     90: net In [high]\n"
        "     10: net NotIn [low]\n"
        "    100: net Exists\n"
        "    100: net DoesNotExist\n"
        "  adds annotation netqos.io/injected=netqos\n"
    )


def test_review_dash_o_response_prints_the_admission_response_as_sent():
    done = run("review", str(TEST_POD), "-o", "response")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)["response"]
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"


def test_review_beside_a_pods_own_term_names_only_the_terms_it_adds():
    done = run("review", "-", stdin=json.dumps(fixture("review-create-existing-affinity.json")))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "  adds preferred node affinity (weight: terms):",
        "     14: net In [high]",
        "      2: net NotIn [low]",
        "  adds annotation netqos.io/injected=netqos",
    ]


def test_review_dash_o_pod_prints_the_mutated_pod_as_yaml():
    done = run("review", str(TEST_POD), "-o", "pod")
    assert done.returncode == 0, done.stderr
    pod = yaml.safe_load(done.stdout)
    original = yaml.safe_load(TEST_POD.read_text())
    assert pod["spec"]["affinity"]["nodeAffinity"][PREFERRED] == NETQOS_TERMS
    assert pod["metadata"]["annotations"] == {"netqos.io/injected": "netqos"}
    assert pod["spec"]["tolerations"] == original["spec"]["tolerations"]
    assert list(pod["spec"]) == list(original["spec"]) + ["affinity"]  # nothing reordered


def test_review_dash_o_patch_reads_an_admission_review_from_stdin():
    done = run("review", "-", "-o", "patch", stdin=json.dumps(fixture("review-create-existing-affinity.json")))
    assert done.returncode == 0, done.stderr
    ops = json.loads(done.stdout)
    assert [op["path"] for op in ops] == [
        "/metadata/annotations/netqos.io~1injected",
        # beside the pod's own preferred term: the table's two terms, without the constant
        f"/spec/affinity/nodeAffinity/{PREFERRED}/1",
        f"/spec/affinity/nodeAffinity/{PREFERRED}/2",
    ]


def test_review_keeps_yaml_timestamps_as_the_strings_the_api_server_sends():
    pod = TEST_POD.read_text().replace(
        "  name: qos-demo-pod\n", "  name: qos-demo-pod\n  creationTimestamp: 2026-12-02T09:58:38Z\n"
    )
    done = run("review", "-", "-o", "pod", stdin=pod)
    assert done.returncode == 0, done.stderr
    assert yaml.safe_load(done.stdout)["metadata"]["creationTimestamp"] == "2026-12-02T09:58:38Z"


def test_review_prints_warnings_on_stderr_as_kubectl_would():
    done = run("review", "-", stdin=json.dumps(fixture("review-create-explicit-net.json")))
    assert done.returncode == 0 and done.stderr.startswith('Warning: netqos-webhook: rule "netqos" not applied')


@pytest.mark.parametrize(
    "case, args, stdin, fragment",
    [
        ("missing file", ["review", "no/such/pod.yaml"], None, "input file no/such/pod.yaml: cannot read it"),
        ("not YAML", ["review", "-"], "a: [", "input file -: not valid YAML or JSON"),
        ("not a pod", ["review", "-"], "kind: Service\n", "expected a Pod, an AdmissionReview or a workload"),
        ("a list", ["review", "-"], "- 1\n", "input file -: is a list, not a Kubernetes object"),
        ("nothing", ["review", "-"], "", "input - holds no object"),
        (
            "broken review",
            ["review", "-"],
            '{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}',
            "request must be an object",
        ),
        (
            "missing policy",
            ["review", str(TEST_POD), "--config", "no/such/policy.yaml"],
            None,
            "policy file no/such/policy.yaml: cannot read it",
        ),
    ],
)
def test_unusable_input_is_one_clear_line_and_exit_code_2(case, args, stdin, fragment):
    done = run(*args, stdin=stdin)
    assert done.returncode == 2, case
    assert fragment in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_serve_refuses_to_start_with_an_invalid_policy_and_says_where(tmp_path):
    bad = tmp_path / "policy.yaml"
    bad.write_text(
        "rules:\n- name: netqos\n  podSelector: {}\n  preferences:\n  - weight: 500\n"
        "    matchExpressions: [{key: net, operator: In, values: [high]}]\n"
    )
    done = run("serve", "--config", str(bad), cwd=tmp_path)
    assert done.returncode == 2
    assert (
        f'policy file {bad}: rules[0] "netqos": preferences[0].weight: must be an integer from 1 to 100 (got 500)'
        in done.stderr
    )


def test_serve_reads_the_policy_path_from_the_environment(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "webhook", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"NETQOS_CONFIG": str(tmp_path / "missing.yaml"), "PATH": ""},
    )
    assert done.returncode == 2 and "missing.yaml: cannot read it" in done.stderr


def test_serve_wants_both_certificate_flags_or_neither(tmp_path):
    done = run("serve", "--certfile", "x.crt", cwd=tmp_path)
    assert done.returncode == 2 and "--certfile and --keyfile go together" in done.stderr


def test_certs_writes_the_four_files(tmp_path):
    done = run(
        "certs",
        "--out",
        str(tmp_path / "c"),
        "--service",
        "netqos-webhook",
        "--namespace",
        "netqos-system",
        "--host",
        "127.0.0.1",
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]


@pytest.mark.parametrize("command", ["serve", "review", "certs"])
def test_every_command_has_help_with_an_example(command):
    done = run(command, "--help")
    assert done.returncode == 0 and "example:" in done.stdout and "netqos-webhook " + command in done.stdout
