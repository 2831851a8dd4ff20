"""The webhook configuration built from a policy, and the `manifests` command.

Each safety property of the registration is asserted on its own: a wrong value here breaks or
slows pod creation for a whole cluster.
"""

from __future__ import annotations

import base64
import json
import re

import pytest
import yaml

from tests.fixtures import REPO
from webhook.cli import main
from webhook.manifests import ManifestError, check_url, webhook_configuration
from webhook.policy_file import compile_policy, default_policy

TWO_RULES = {
    "rules": [
        {
            "name": "netqos",
            "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
            "preferences": [{"weight": 90, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}],
        },
        {
            "name": "gpu-batch",
            "podSelector": {
                "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["batch"]},
                    {"key": "gpu", "operator": "Exists"},
                ]
            },
            "preferences": [
                {"weight": 50, "matchExpressions": [{"key": "accel", "operator": "In", "values": ["a100"]}]}
            ],
        },
    ]
}


@pytest.fixture(scope="module")
def default_webhook() -> dict:
    (webhook,) = webhook_configuration(default_policy())["webhooks"]
    return webhook


# (field, expected) for the default policy's one webhook entry, written out by hand.
SAFETY = [
    ("name", "netqos.netqos.io"),
    (
        "rules",
        [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ],
    ),
    ("objectSelector", {"matchLabels": {"qos": "latency-sensitive"}}),
    (
        "namespaceSelector",
        {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "netqos-system"]}
            ]
        },
    ),
    ("failurePolicy", "Ignore"),
    ("sideEffects", "None"),
    ("admissionReviewVersions", ["v1"]),
    ("reinvocationPolicy", "IfNeeded"),
    ("matchPolicy", "Equivalent"),
    (
        "clientConfig",
        {"service": {"name": "netqos-webhook", "namespace": "netqos-system", "path": "/mutate", "port": 443}},
    ),
]


@pytest.mark.parametrize(("field", "expected"), SAFETY, ids=[f for f, _ in SAFETY])
def test_default_webhook_entry_has_the_safe_value(default_webhook: dict, field: str, expected: object) -> None:
    assert default_webhook[field] == expected


def test_timeout_is_kubernetes_default_of_ten_seconds(default_webhook: dict) -> None:
    # Long enough for a burst of new TLS connections on a busy node (docs/performance.md), no
    # longer than what a pod creation waits for a webhook by default.
    assert default_webhook["timeoutSeconds"] == 10


def test_default_entry_has_no_other_fields(default_webhook: dict) -> None:
    # A field added later must be added to SAFETY too, with its reason.
    assert set(default_webhook) == {f for f, _ in SAFETY} | {"timeoutSeconds"}


def test_configuration_metadata() -> None:
    config = webhook_configuration(default_policy())
    assert (config["apiVersion"], config["kind"], config["metadata"]["name"]) == (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "netqos-webhook",
    )


def test_one_entry_per_rule_with_that_rules_pod_selector() -> None:
    config = webhook_configuration(compile_policy(TWO_RULES, "two-rules.yaml"))
    entries = {w["name"]: w["objectSelector"] for w in config["webhooks"]}
    assert entries == {
        "netqos.netqos.io": {"matchLabels": {"qos": "latency-sensitive"}},
        "gpu-batch.netqos.io": {
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["batch"]},
                {"key": "gpu", "operator": "Exists"},
            ]
        },
    }


def test_entry_names_are_unique_dns_subdomains_with_three_segments_and_valid_audit_prefixes() -> None:
    long_rule = "r" * 63
    doc = {"rules": [dict(TWO_RULES["rules"][0], name=long_rule), *TWO_RULES["rules"]]}
    doc["rules"][1] = dict(doc["rules"][1], name="second")
    names = [w["name"] for w in webhook_configuration(compile_policy(doc, "p.yaml"))["webhooks"]]
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name.split(".")) >= 3
        # the API server writes audit annotations as "<webhook name>/injected-rules": the prefix
        # must be a DNS subdomain of at most 253 characters, each label at most 63
        assert len(name) <= 253 and all(0 < len(label) <= 63 for label in name.split("."))
        assert name == name.lower()


def test_the_webhooks_own_namespace_is_excluded_wherever_it_runs() -> None:
    config = webhook_configuration(default_policy(), namespace="platform-webhooks")
    (webhook,) = config["webhooks"]
    assert webhook["clientConfig"]["service"]["namespace"] == "platform-webhooks"
    assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "platform-webhooks"]


def test_ca_bundle_is_the_base64_of_the_pem_in_every_entry() -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    config = webhook_configuration(compile_policy(TWO_RULES, "p.yaml"), ca_bundle=pem)
    assert [base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"]] == [pem, pem]


def test_without_a_ca_bundle_the_field_is_left_out_for_register_or_cert_manager() -> None:
    (webhook,) = webhook_configuration(default_policy())["webhooks"]
    assert "caBundle" not in webhook["clientConfig"]


def test_url_replaces_the_service() -> None:
    (webhook,) = webhook_configuration(default_policy(), url="https://host.minikube.internal:8443/mutate")["webhooks"]
    assert webhook["clientConfig"] == {"url": "https://host.minikube.internal:8443/mutate"}


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:8443/mutate", "scheme must be https"),
        ("https:///mutate", "needs a host"),
        ("https://user:pw@dev.example:8443/mutate", "user information"),
        ("https://dev.example:8443/mutate?rule=netqos", "query parameters"),
        ("https://dev.example:8443/mutate#x", "fragment"),
        ("https://dev.example:8443", "path"),
        ("https://dev.example:99999/mutate", "not a URL"),
        # Go's url.Parse, under the API server's ValidateWebhookURL, refuses these
        ("https://my host:8443/mutate", "the host 'my host' is neither an IP address nor a DNS name"),
        ("https://dev.example:84a3/mutate", "not a URL"),
        # accepted by the API server, and then every call fails
        ("https://dev.example:0/mutate", "port 0 is no port a server listens on"),
        ("https://dev.example:8443/validate", "the path must be /mutate, the one the webhook serves"),
        ("https://dev.example:8443/", "the path must be /mutate"),
        ("https://dev.example:8443/mutate/", "the path must be /mutate"),
        ("https://dev.example:8443/mutate?", "query parameters"),
    ],
)
def test_urls_the_api_server_would_reject_or_the_webhook_not_serve_are_refused(url: str, problem: str) -> None:
    with pytest.raises(ManifestError, match=re.escape(problem)):
        check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "https://dev.example:8443/mutate",
        "https://dev.example/mutate",
        "https://127.0.0.1:8443/mutate",
        "https://[::1]:8443/mutate",
        "https://Host.Minikube.Internal:8443/mutate",
    ],
)
def test_urls_the_webhook_serves_pass(url: str) -> None:
    check_url(url)


def test_an_invalid_namespace_is_refused() -> None:
    with pytest.raises(ManifestError, match="Netqos_System"):
        webhook_configuration(default_policy(), namespace="Netqos_System")


@pytest.mark.parametrize("namespace", ["netqos-system\n", "a" * 64, "netqos.system", "-netqos", ""])
def test_a_namespace_the_api_server_refuses_is_refused_whatever_its_flaw(namespace: str) -> None:
    with pytest.raises(ManifestError, match="not a valid namespace name"):
        webhook_configuration(default_policy(), namespace=namespace)


def test_entries_share_no_objects_so_yaml_has_no_aliases() -> None:
    text = yaml.safe_dump(webhook_configuration(compile_policy(TWO_RULES, "p.yaml")))
    assert "&id" not in text and "*id" not in text


# --- the command -------------------------------------------------------------------------------


def test_manifests_yaml_starts_with_the_command_that_regenerates_it(
    capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.chdir(REPO)
    assert main(["manifests", "--config", "deploy/base/policy.yaml", "--namespace", "ops"]) == 0
    out = capsys.readouterr().out
    assert (
        out.splitlines()[0]
        == "# Generated by: netqos-webhook manifests --config deploy/base/policy.yaml --namespace ops"
    )
    assert yaml.safe_load(out) == webhook_configuration(default_policy(), namespace="ops")


def test_manifests_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifests", "-o", "json", "--url", "https://10.0.2.2:8443/mutate"]) == 0
    assert json.loads(capsys.readouterr().out) == webhook_configuration(
        default_policy(), url="https://10.0.2.2:8443/mutate"
    )


def test_manifests_ca_bundle_from_a_file(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from webhook.certs import generate

    files = generate(tmp_path)
    assert main(["manifests", "-o", "json", "--ca-bundle", str(files.ca_cert)]) == 0
    (webhook,) = json.loads(capsys.readouterr().out)["webhooks"]
    assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == files.ca_cert.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ca-bundle", "{tmp}/missing.crt"], "--ca-bundle file {tmp}/missing.crt: cannot read it"),
        (["--ca-bundle", "{tmp}/key.pem"], "--ca-bundle {tmp}/key.pem holds no PEM certificate"),
        (["--url", "http://dev:8443/mutate"], "scheme must be https"),
        (["--namespace", "NS"], "namespace 'NS' is not a valid namespace name"),
        (["--config", "{tmp}/missing-policy.yaml"], "policy file {tmp}/missing-policy.yaml: cannot read it"),
    ],
)
def test_manifests_bad_input_is_one_message_and_exit_2(tmp_path, capsys, args: list[str], message: str) -> None:
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n")
    code = main(["manifests", *[a.format(tmp=tmp_path) for a in args]])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert message.format(tmp=tmp_path) in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_manifests_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["manifests", "--help"])
    assert "example:\n  netqos-webhook manifests" in capsys.readouterr().out
