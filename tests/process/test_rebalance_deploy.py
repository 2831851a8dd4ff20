"""deploy/overlays/rebalance: the CronJob renders with deploy/base into valid Kubernetes objects
(strict schemas, as every other tree), is hardened like the webhook's pod, runs one `rebalance
--apply` at a time every ten minutes with the webhook's own policy ConfigMap, and its ClusterRole
grants exactly what the command does: list pods and nodes, get the controllers it checks, create
evictions and their Events; its Role, get and update of the one ConfigMap that keeps the evictions
made, in its own namespace, which the command is pointed at.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.fixtures import REPO
from tests.process.test_deploy import HARDENING, K8S_VERSIONS, at, one
from webhook import __version__

REBALANCE = REPO / "deploy/overlays/rebalance"
SCHEDULER_CONFIG = REPO / "deploy/overlays/rebalance-scheduler-config"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'"
)


def render(tree: Path, base: str, components: tuple[Path, ...] = (REBALANCE,), **more: Any) -> list[dict[str, Any]]:
    """`base` (a deploy/ tree) with the rebalance component (and `components`), as a user's
    kustomization combines them; `more` goes into that kustomization too."""
    (tree / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize takes only relative paths
                "resources": [os.path.relpath(REPO / "deploy" / base, tree)],
                "components": [os.path.relpath(c, tree) for c in components],
                **more,
            }
        )
    )
    done = subprocess.run([KUBECTL, "kustomize", str(tree)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'")
    return render(tmp_path_factory.mktemp("installation"), "base")


@pytest.fixture(scope="module")
def cronjob(rendered) -> dict[str, Any]:
    return one(rendered, "CronJob", "netqos-rebalance")


@pytest.fixture(scope="module")
def pod_spec(cronjob) -> dict[str, Any]:
    spec: dict[str, Any] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return spec


@pytest.fixture(scope="module")
def container(pod_spec) -> dict[str, Any]:
    (c,) = pod_spec["containers"]
    return c


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_rendered_object_is_valid_against_the_kubernetes_schema(rendered, version: str) -> None:
    for obj in rendered:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(map(str, err.path))
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} is invalid for Kubernetes {version}: {path}: {err}")


def test_the_component_adds_its_own_objects_and_changes_nothing_of_the_base(rendered, tmp_path: Path) -> None:
    added = sorted(
        (o["kind"], o["metadata"]["name"])
        for o in rendered
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "rebalance"
    )
    assert added == [
        ("ClusterRole", "netqos-rebalance"),
        ("ClusterRoleBinding", "netqos-rebalance"),
        ("ConfigMap", "netqos-rebalance-history"),
        ("CronJob", "netqos-rebalance"),
        ("Role", "netqos-rebalance"),
        ("RoleBinding", "netqos-rebalance"),
        ("ServiceAccount", "netqos-rebalance"),
    ]
    base = subprocess.run(
        [KUBECTL, "kustomize", str(REPO / "deploy/base")], capture_output=True, text=True, timeout=120
    )
    ours = set(added)
    rest = [o for o in rendered if (o["kind"], o["metadata"]["name"]) not in ours]
    assert rest == [d for d in yaml.safe_load_all(base.stdout) if d]


@needs_kubectl
def test_the_component_composes_with_the_cert_manager_overlay(tmp_path: Path) -> None:
    objs = render(tmp_path, "overlays/cert-manager")
    assert one(objs, "CronJob", "netqos-rebalance")


def test_runs_every_ten_minutes_one_run_at_a_time_never_retried(cronjob) -> None:
    spec = cronjob["spec"]
    assert spec["schedule"] == "*/10 * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    assert job["activeDeadlineSeconds"] < 600  # a run ends before the next is due
    assert job["template"]["spec"]["restartPolicy"] == "Never"


# The webhook's pod runs as its own account with no token; the rebalancer's needs one.
OWN_IDENTITY = {"automountServiceAccountToken", "serviceAccountName"}


@pytest.mark.parametrize(
    ("where", "path", "expected"),
    [h for h in HARDENING if h[1] not in OWN_IDENTITY],
    ids=[f"{w}.{p}" for w, p, _ in HARDENING if p not in OWN_IDENTITY],
)
def test_the_pod_is_hardened_like_the_webhooks(pod_spec, container, where: str, path: str, expected: Any) -> None:
    assert at(pod_spec if where == "pod" else container, path) == expected


def test_the_pod_runs_as_its_own_service_account_with_a_token(rendered, pod_spec) -> None:
    assert pod_spec["serviceAccountName"] == "netqos-rebalance"
    assert pod_spec["automountServiceAccountToken"] is True
    account = one(rendered, "ServiceAccount", "netqos-rebalance")
    assert account["metadata"]["namespace"] == one(rendered, "CronJob")["metadata"]["namespace"]
    binding = one(rendered, "ClusterRoleBinding", "netqos-rebalance")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "netqos-rebalance",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "netqos-rebalance", "namespace": account["metadata"]["namespace"]}
    ]


def test_the_cluster_role_grants_exactly_what_rebalance_does(rendered) -> None:
    """What `rebalance --apply --config FILE` sends (tests/process/test_rebalance.py checks the
    requests): lists of nodes, pods and Services, gets of the candidates' controllers, the budgets,
    the live registration, evictions."""
    from webhook.owners import CLIMB

    assert set(CLIMB) == {"ReplicaSet", "Job"}
    granted = {
        (group, resource, verb)
        for rule in one(rendered, "ClusterRole", "netqos-rebalance")["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert granted == {
        ("", "pods", "list"),
        ("", "nodes", "list"),
        ("", "services", "list"),
        ("apps", "replicasets", "get"),
        ("apps", "statefulsets", "get"),
        ("batch", "jobs", "get"),
        ("", "replicationcontrollers", "get"),
        ("policy", "poddisruptionbudgets", "list"),
        # the live registration: only pods whose replacement the webhook will mutate are evicted
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "get"),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicies", "list"),
        ("admissionregistration.k8s.io", "mutatingadmissionpolicybindings", "list"),
        ("discovery.k8s.io", "endpointslices", "list"),
        ("", "namespaces", "list"),
        # what admission reads: the replacements are predicted as the API server would admit them
        ("", "limitranges", "list"),
        ("node.k8s.io", "runtimeclasses", "list"),
        ("", "pods/eviction", "create"),
        # an Event on each evicted pod and on its owner, as the descheduler records its evictions
        ("events.k8s.io", "events", "create"),
    }


def test_the_role_grants_get_and_update_of_the_history_configmap_alone_in_the_cronjobs_namespace(
    rendered, container
) -> None:
    """The one namespaced write `rebalance --apply` makes: the records of the evictions made, in the
    ConfigMap the component ships (without data: applying again keeps the records), which the
    command is pointed at in its own namespace (the downward API)."""
    from webhook.cli import build_parser

    namespace = one(rendered, "CronJob", "netqos-rebalance")["metadata"]["namespace"]
    history = one(rendered, "ConfigMap", "netqos-rebalance-history")
    assert history["metadata"]["namespace"] == namespace and "data" not in history
    role = one(rendered, "Role", "netqos-rebalance")
    assert role["metadata"]["namespace"] == namespace
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["netqos-rebalance-history"],
            "verbs": ["get", "update"],
        }
    ]
    binding = one(rendered, "RoleBinding", "netqos-rebalance")
    assert binding["metadata"]["namespace"] == namespace
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "netqos-rebalance"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "netqos-rebalance", "namespace": namespace}]
    args = build_parser().parse_args([*container["command"][1:], *container["args"]])
    assert (args.webhook_namespace, args.history_configmap) == ("$(POD_NAMESPACE)", "netqos-rebalance-history")
    assert {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}} in container["env"]


def test_the_policy_is_the_webhooks_own_configmap(rendered, pod_spec, container) -> None:
    webhook = one(rendered, "Deployment", "netqos-webhook")["spec"]["template"]["spec"]
    webhook_config = [v for v in webhook["volumes"] if v["name"] == "config"]
    assert [v for v in pod_spec["volumes"] if v["name"] == "config"] == webhook_config
    assert {"name": "config", "mountPath": "/config", "readOnly": True} in container["volumeMounts"]
    assert "--config=/config/policy.yaml" in container["args"]


def test_the_image_is_the_webhooks(rendered, container) -> None:
    webhook = one(rendered, "Deployment", "netqos-webhook")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == webhook["image"] == f"netqos-webhook:{__version__}"


def test_evicts_at_most_one_pod_per_run(container) -> None:
    assert container["command"] == ["netqos-webhook", "rebalance"]
    assert "--apply" in container["args"]
    assert "--max-evictions=1" in container["args"]


def test_the_container_command_is_a_valid_rebalance_command_line(container) -> None:
    from webhook.cli import build_parser

    args = build_parser().parse_args([*container["command"][1:], *container["args"]])
    assert (args.command, args.apply, args.max_evictions, args.config) == ("rebalance", True, 1, "/config/policy.yaml")
    assert args.movable_exit_code == 0  # pods left to move are the next run's work, not a failed Job


# --- deploy/overlays/rebalance-scheduler-config: the cluster's scheduler configuration ------------


def scheduler_config_job(objs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The CronJob's pod spec and container, and the ConfigMap its scheduler-config volume names."""
    spec = one(objs, "CronJob", "netqos-rebalance")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "scheduler-config"]
    (config_map,) = [
        o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == volume["configMap"]["name"]
    ]
    return spec, spec["containers"][0], config_map


@needs_kubectl
def test_the_scheduler_config_component_mounts_its_file_and_passes_it_as_scheduler_config(tmp_path: Path) -> None:
    from webhook.cli import build_parser
    from webhook.commands.plan import SchedulerProfiles

    objs = render(tmp_path, "base", (SCHEDULER_CONFIG,))
    _, container, config_map = scheduler_config_job(objs)
    # the rebalance component's objects and this ConfigMap; its CronJob with the file added alone
    (tmp_path / "plain").mkdir()
    plain = render(tmp_path / "plain", "base")
    expected = copy.deepcopy(one(plain, "CronJob", "netqos-rebalance"))
    plain_spec = expected["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    plain_spec["containers"][0]["args"].append("--scheduler-config=/scheduler-config/scheduler-config.yaml")
    plain_spec["containers"][0]["volumeMounts"].append(
        {"name": "scheduler-config", "mountPath": "/scheduler-config", "readOnly": True}
    )
    plain_spec["volumes"].append({"name": "scheduler-config", "configMap": {"name": config_map["metadata"]["name"]}})
    assert one(objs, "CronJob", "netqos-rebalance") == expected
    assert [o for o in objs if o["kind"] != "CronJob" and o is not config_map] == [
        o for o in plain if o["kind"] != "CronJob"
    ]
    assert config_map["metadata"]["name"].startswith("netqos-rebalance-scheduler-config-")  # hashed: a change rolls
    assert config_map["metadata"]["namespace"] == "netqos-system"
    assert {"name": "scheduler-config", "mountPath": "/scheduler-config", "readOnly": True} in container["volumeMounts"]
    args = build_parser().parse_args([*container["command"][1:], *container["args"]])
    assert args.scheduler_config == ["/scheduler-config/scheduler-config.yaml"]
    assert args.apply and args.max_evictions == 1  # the rest of the command as the rebalance component has it
    file = tmp_path / "scheduler-config.yaml"
    file.write_text(config_map["data"]["scheduler-config.yaml"])
    assert set(SchedulerProfiles.read([str(file)], ValueError).profiles) == {"default-scheduler", "netqos-scheduler"}
    for version in K8S_VERSIONS:
        for obj in objs:
            kubernetes_validate.validate(obj, version, strict=True)


@needs_kubectl
def test_a_users_own_scheduler_config_replaces_the_example_and_the_job_mounts_it(tmp_path: Path) -> None:
    from webhook.commands.plan import SchedulerProfiles

    # as the component's comment tells the user: a component of their own, listed after it
    own = (REPO / "tests/fixtures/scheduler-config-pool-b.yaml").read_text()
    mine = tmp_path / "scheduler-config"
    mine.mkdir()
    (mine / "my-kube-scheduler-config.yaml").write_text(own)
    replace = {
        "name": "netqos-rebalance-scheduler-config",
        "namespace": "netqos-system",
        "behavior": "replace",
        "files": ["scheduler-config.yaml=my-kube-scheduler-config.yaml"],
    }
    component = {"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component", "configMapGenerator": [replace]}
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(component))
    objs = render(tmp_path, "base", (SCHEDULER_CONFIG, mine))
    _, _, config_map = scheduler_config_job(objs)
    assert config_map["data"] == {"scheduler-config.yaml": own}
    assert len([o for o in objs if o["kind"] == "ConfigMap" and "scheduler-config" in o["metadata"]["name"]]) == 1
    file = tmp_path / "rendered.yaml"
    file.write_text(config_map["data"]["scheduler-config.yaml"])
    assert set(SchedulerProfiles.read([str(file)], ValueError).profiles) == {"pool-b-scheduler"}


@needs_kubectl
def test_without_the_scheduler_config_component_the_job_passes_no_scheduler_config(container) -> None:
    assert not any(a.startswith("--scheduler-config") for a in container["args"])
    assert all(m["name"] != "scheduler-config" for m in container["volumeMounts"])


# --- --missing: the patch docs/operations.md gives for the component --------------------------------


def documented_missing_patch() -> list[dict[str, Any]]:
    """The `patches` of the kustomization docs/operations.md ("The CronJob") shows for `--missing`."""
    text = (REPO / "docs/operations.md").read_text()
    blocks = [b.split("\n", 1)[1] for b in text.split("```yaml\n")[1:]]
    (block,) = [b.split("```", 1)[0] for b in blocks if "value: --missing" in b.split("```", 1)[0]]
    patches: list[dict[str, Any]] = yaml.safe_load(block)["patches"]
    return patches


@needs_kubectl
def test_the_documented_patch_makes_the_cronjob_recreate_pods_created_without_the_preference(
    rendered, tmp_path: Path
) -> None:
    from webhook.cli import build_parser

    objs = render(tmp_path, "base", patches=documented_missing_patch())
    (container,) = one(objs, "CronJob", "netqos-rebalance")["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"
    ]
    args = build_parser().parse_args([*container["command"][1:], *container["args"]])
    assert (args.missing, args.apply, args.max_evictions) == (True, True, 1)
    # the rest is the component's own: the same objects, the CronJob with the flag added alone
    expected = copy.deepcopy(one(rendered, "CronJob", "netqos-rebalance"))
    expected["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"].append("--missing")
    assert one(objs, "CronJob", "netqos-rebalance") == expected
    assert [o for o in objs if o["kind"] != "CronJob"] == [o for o in rendered if o["kind"] != "CronJob"]
