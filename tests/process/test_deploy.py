"""deploy/: the kustomizations render, every object is valid Kubernetes, the installation is
hardened, its parts agree with each other and with the server, and the webhook configuration is
the `manifests` output for the shipped policy.

Rendering uses `kubectl kustomize` (offline); schema validation uses kubernetes-validate's
bundled OpenAPI schemas in strict mode (unknown fields are errors).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.fixtures import REPO
from webhook import __version__
from webhook.certs import CertFiles, generate, service_names
from webhook.cli import build_parser, main
from webhook.manifests import webhook_configuration
from webhook.policy_file import DEFAULT_DOCUMENT, load_policy

DEPLOY = REPO / "deploy"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'"
)
# The oldest Kubernetes minor this installation is checked against, and the newest the validator knows.
K8S_VERSIONS = ("1.28", kubernetes_validate.utils.major_minor(kubernetes_validate.utils.latest_version()))
# Custom resources: no schema ships with Kubernetes; their fields are asserted below instead.
CRD_GROUPS = ("cert-manager.io/",)
GENERATED = DEPLOY / "base/webhook-configuration/mutatingwebhookconfiguration.yaml"


def kustomize(path: Path) -> list[dict[str, Any]]:
    done = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kubectl kustomize {path} failed: {done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def dev_overlay_copy(tmp: Path) -> tuple[Path, CertFiles]:
    """deploy/ copied, with the certificates the dev overlay reads made in the copy."""
    copy = tmp / "deploy"
    shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("certs"))
    files = generate(copy / "overlays/dev/certs", hosts=["host.minikube.internal"])
    return copy / "overlays/dev", files


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The objects each tree renders to, and the dev overlay's CA (bytes) under "dev-ca"."""
    if KUBECTL is None:
        pytest.skip("kubectl is not installed: cannot render deploy/ with 'kubectl kustomize'")
    dev, files = dev_overlay_copy(tmp_path_factory.mktemp("dev"))
    return {
        "base": kustomize(DEPLOY / "base"),
        "cert-manager": kustomize(DEPLOY / "overlays/cert-manager"),
        "dev": kustomize(dev),
        "dev-ca": files.ca_cert.read_bytes(),
    }


def one(objs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def validate(obj: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(obj, version, strict=True)


# --- rendering and schema validation -----------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("tree", ["base", "cert-manager", "dev"])
def test_every_rendered_object_is_valid_against_the_kubernetes_schema(rendered, tree: str, version: str) -> None:
    objs = rendered[tree]
    assert objs, f"{tree} rendered nothing"
    for obj in objs:
        if obj["apiVersion"].startswith(CRD_GROUPS):
            continue
        try:
            validate(obj, version)
        except kubernetes_validate.ValidationError as err:
            path = ".".join(map(str, err.path))
            name = f"{obj['kind']}/{obj['metadata']['name']}"
            pytest.fail(f"{tree}: {name} is invalid for Kubernetes {version}: {path}: {err.message}")


def test_the_schema_check_catches_a_misspelt_field() -> None:
    deployment = yaml.safe_load((DEPLOY / "base/deployment.yaml").read_text())
    deployment["spec"]["replica"] = deployment["spec"].pop("replicas")
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment, K8S_VERSIONS[-1])


# Not for kubectl apply: nodes.yaml is `netqos-webhook explain` input, a `kubectl get nodes -o yaml`
# print-out with status trimmed (status.nodeInfo lacks fields the schema requires of a real node);
# descheduler-policy.yaml is the descheduler's configuration (tests/unit/test_descheduler_policy.py).
NOT_APPLIED = {"nodes.yaml", "descheduler-policy.yaml"}


@pytest.mark.parametrize(
    "example", sorted(p.name for p in (DEPLOY / "examples").glob("*.yaml") if p.name not in NOT_APPLIED)
)
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_examples_are_valid_against_the_kubernetes_schema(example: str, version: str) -> None:
    for obj in yaml.safe_load_all((DEPLOY / "examples" / example).read_text()):
        # a kubectl-style List (as `kubectl get -o yaml` prints) has no schema: check its items
        for item in obj["items"] if obj["kind"] == "List" else [obj]:
            validate(item, version)


def test_base_is_a_complete_installation(rendered) -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered["base"])
    assert [k for k, _ in kinds] == sorted(
        [
            "ConfigMap",
            "Deployment",
            "MutatingWebhookConfiguration",
            "Namespace",
            "NetworkPolicy",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration",
        ]
    )
    cluster_scoped = ("Namespace", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    namespaced = [o for o in rendered["base"] if o["kind"] not in cluster_scoped]
    assert {o["metadata"]["namespace"] for o in namespaced} == {"netqos-system"}
    assert one(rendered["base"], "Namespace")["metadata"]["name"] == "netqos-system"


# --- one source of truth for the webhook configuration ------------------------------------------


def test_base_webhook_configuration_is_the_manifests_output_for_the_shipped_policy(rendered) -> None:
    policy = load_policy(DEPLOY / "base/policy.yaml")
    assert one(rendered["base"], "MutatingWebhookConfiguration") == webhook_configuration(policy)


def test_generated_file_is_byte_for_byte_what_manifests_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["manifests", "--config", "deploy/base/policy.yaml"]) == 0
    assert GENERATED.read_text() == out.getvalue(), (
        f"{GENERATED.relative_to(REPO)} is out of date; regenerate it with: "
        f"netqos-webhook manifests --config deploy/base/policy.yaml > {GENERATED.relative_to(REPO)}"
    )


def test_shipped_policy_is_the_built_in_default(rendered) -> None:
    configmap = one(rendered["base"], "ConfigMap")
    assert configmap["metadata"]["name"].startswith("netqos-webhook-policy-")  # hashed: edits roll the pods
    assert configmap["data"] == {"policy.yaml": (DEPLOY / "base/policy.yaml").read_text()}
    assert yaml.safe_load(configmap["data"]["policy.yaml"]) == DEFAULT_DOCUMENT


# --- the server's pods -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deployment(rendered) -> dict[str, Any]:
    return one(rendered["base"], "Deployment", "netqos-webhook")


@pytest.fixture(scope="module")
def container(deployment) -> dict[str, Any]:
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


def at(obj: Any, path: str) -> Any:
    for key in path.split("."):
        obj = obj[int(key)] if isinstance(obj, list) else obj.get(key) if isinstance(obj, dict) else None
    return obj


HARDENING = [
    # (where, path, expected)
    ("pod", "securityContext.runAsNonRoot", True),
    ("pod", "securityContext.seccompProfile.type", "RuntimeDefault"),
    ("pod", "automountServiceAccountToken", False),
    ("pod", "serviceAccountName", "netqos-webhook"),
    ("pod", "enableServiceLinks", False),
    ("container", "securityContext.readOnlyRootFilesystem", True),
    ("container", "securityContext.allowPrivilegeEscalation", False),
    ("container", "securityContext.privileged", False),
    ("container", "securityContext.capabilities", {"drop": ["ALL"]}),
]


@pytest.mark.parametrize(("where", "path", "expected"), HARDENING, ids=[f"{w}.{p}" for w, p, _ in HARDENING])
def test_pods_are_hardened(deployment, container, where: str, path: str, expected: Any) -> None:
    obj = deployment["spec"]["template"]["spec"] if where == "pod" else container
    assert at(obj, path) == expected


def test_pods_run_as_a_numeric_non_root_user(deployment) -> None:
    context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert isinstance(context["runAsUser"], int) and context["runAsUser"] > 0
    assert isinstance(context["runAsGroup"], int) and context["runAsGroup"] > 0


def test_service_account_mounts_no_token(rendered) -> None:
    assert one(rendered["base"], "ServiceAccount", "netqos-webhook")["automountServiceAccountToken"] is False


@pytest.mark.parametrize("resource", ["cpu", "memory"])
def test_container_has_requests_and_limits(container, resource: str) -> None:
    from_quantity = {"m": 1e-3, "Mi": 2**20, "Gi": 2**30, "": 1}
    value = {}
    for kind in ("requests", "limits"):
        text = str(container["resources"][kind][resource])
        number, unit = re.fullmatch(r"([0-9.]+)(m|Mi|Gi|)", text).groups()
        value[kind] = float(number) * from_quantity[unit]
    assert 0 < value["requests"] <= value["limits"]


def test_memory_limit_covers_every_worker_at_its_worst(container, serve_args) -> None:
    """docs/operations.md, "Hostile clients": RSS measured at rest, per idle TLS connection and for
    decoding a 3 MiB review; the budget and connection counts are the server's defaults."""
    from webhook.serving.server import MAX_WORKER_CONNECTIONS

    master, worker, review_3mib, per_connection = 50 * 2**20, 46 * 2**20, 59 * 2**20, 25 * 1024
    each = worker + serve_args.body_budget_bytes + review_3mib + MAX_WORKER_CONNECTIONS * per_connection
    worst = master + serve_args.workers * each
    number, unit = re.fullmatch(r"([0-9]+)(Mi|Gi)", container["resources"]["limits"]["memory"]).groups()
    assert worst < int(number) * {"Mi": 2**20, "Gi": 2**30}[unit]


def test_two_replicas_spread_across_nodes(deployment) -> None:
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    (spread,) = spec["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["maxSkew"] == 1
    assert spread["labelSelector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0  # a rollout never drops a replica


def test_container_command_is_a_valid_serve_command_line(container) -> None:
    assert container["command"] == ["netqos-webhook", "serve"]
    build_parser().parse_args(container["command"][1:] + container["args"])


@pytest.fixture(scope="module")
def serve_args(container) -> Any:
    return build_parser().parse_args(container["command"][1:] + container["args"])


def mount_for(container: dict[str, Any], path: str) -> dict[str, Any]:
    mounts = [m for m in container["volumeMounts"] if path.startswith(m["mountPath"].rstrip("/") + "/")]
    assert len(mounts) == 1, f"{path} is not under exactly one volume mount"
    return mounts[0]


def volume(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    (v,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == name]
    return v


def test_server_listens_on_the_container_port_on_all_interfaces(container, serve_args) -> None:
    host, port = serve_args.bind.rsplit(":", 1)
    assert host == "0.0.0.0"
    (declared,) = container["ports"]
    assert (declared["name"], declared["containerPort"]) == ("https", int(port))


def test_certificate_and_key_come_from_the_tls_secret(deployment, container, serve_args) -> None:
    for path in (serve_args.certfile, serve_args.keyfile):
        mount = mount_for(container, str(path))
        assert mount["readOnly"] is True
        source = volume(deployment, mount["name"])["secret"]
        assert source["secretName"] == "netqos-webhook-tls"
        assert Path(path).name in ("tls.crt", "tls.key")  # the keys of a kubernetes.io/tls Secret


def test_policy_comes_from_the_configmap(rendered, deployment, container, serve_args) -> None:
    mount = mount_for(container, serve_args.config)
    configmap = volume(deployment, mount["name"])["configMap"]["name"]
    assert Path(serve_args.config).name in one(rendered["base"], "ConfigMap", configmap)["data"]


@pytest.mark.parametrize(("probe", "path"), [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")])
def test_probes_ask_the_server_over_https(container, serve_args, probe: str, path: str) -> None:
    get = container[probe]["httpGet"]
    assert (get["scheme"], get["path"]) == ("HTTPS", path)
    port = get["port"]
    if isinstance(port, str):
        (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == port]
    assert port == int(serve_args.bind.rsplit(":", 1)[1])


def test_probe_paths_are_served_by_the_app() -> None:
    from webhook.policy_file import default_policy
    from webhook.serving.app import AppConfig, create_app

    client = create_app(AppConfig(policy=default_policy())).test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 200


def test_only_memory_backed_temp_dir_is_writable(deployment, container) -> None:
    # gunicorn's worker heartbeat files go to the temp dir (worker_tmp_dir defaults to it); with a
    # read-only root filesystem that must be a writable emptyDir, on tmpfs so fchmod never blocks.
    writable = [m for m in container["volumeMounts"] if not m.get("readOnly")]
    assert [m["mountPath"] for m in writable] == ["/tmp"]
    assert volume(deployment, writable[0]["name"])["emptyDir"]["medium"] == "Memory"
    assert {"name": "TMPDIR", "value": "/tmp"} in container["env"]


def test_image_tag_is_the_package_version(container) -> None:
    assert container["image"] == f"netqos-webhook:{__version__}"


# --- how the API server reaches the pods -------------------------------------------------------


def test_service_routes_443_to_the_servers_port(rendered, deployment, container) -> None:
    service = one(rendered["base"], "Service", "netqos-webhook")
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    assert port["targetPort"] in (c["name"] for c in container["ports"])
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def test_webhook_calls_the_service(rendered) -> None:
    service = one(rendered["base"], "Service")
    for webhook in one(rendered["base"], "MutatingWebhookConfiguration")["webhooks"]:
        target = webhook["clientConfig"]["service"]
        assert (target["name"], target["namespace"], target["port"]) == (
            service["metadata"]["name"],
            service["metadata"]["namespace"],
            service["spec"]["ports"][0]["port"],
        )
        assert target["path"] == "/mutate"


def test_webhook_never_calls_itself_for_its_own_pods(rendered) -> None:
    namespace = one(rendered["base"], "Namespace")["metadata"]["name"]
    for webhook in one(rendered["base"], "MutatingWebhookConfiguration")["webhooks"]:
        (expr,) = webhook["namespaceSelector"]["matchExpressions"]
        assert expr["operator"] == "NotIn" and {namespace, "kube-system"} <= set(expr["values"])


def test_disruption_budget_keeps_one_of_the_replicas(rendered, deployment) -> None:
    pdb = one(rendered["base"], "PodDisruptionBudget")
    assert (
        pdb["spec"]["selector"]["matchLabels"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    )
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_network_policy_admits_only_the_servers_port_to_the_webhook_pods(rendered, deployment, container) -> None:
    policy = one(rendered["base"], "NetworkPolicy")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (port,) = container["ports"]
    assert rule == {"ports": [{"protocol": "TCP", "port": port["containerPort"]}]}, "TCP 8443 from any source"


def test_base_has_no_static_ca_bundle_so_reapplying_keeps_the_registered_one(rendered) -> None:
    for webhook in one(rendered["base"], "MutatingWebhookConfiguration")["webhooks"]:
        assert "caBundle" not in webhook["clientConfig"]


# --- overlays ----------------------------------------------------------------------------------


def test_cert_manager_overlay_injects_the_ca_of_the_serving_certificate(rendered, deployment) -> None:
    objs = rendered["cert-manager"]
    config = one(objs, "MutatingWebhookConfiguration")
    namespace, name = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].split("/")
    serving = one(objs, "Certificate", name)
    assert serving["metadata"]["namespace"] == namespace == "netqos-system"
    assert serving["spec"]["secretName"] == volume(deployment, "tls")["secret"]["secretName"]
    assert set(service_names("netqos-webhook", namespace)) <= set(serving["spec"]["dnsNames"])
    assert "server auth" in serving["spec"]["usages"]
    assert all("caBundle" not in w["clientConfig"] for w in config["webhooks"])


def test_cert_manager_overlay_signs_with_a_ca_bootstrapped_from_a_self_signed_issuer(rendered) -> None:
    objs = rendered["cert-manager"]
    serving = one(objs, "Certificate", "netqos-webhook-tls")
    ca_issuer = one(objs, "Issuer", serving["spec"]["issuerRef"]["name"])
    assert serving["spec"]["issuerRef"]["kind"] == "Issuer"
    ca_certificate = one(objs, "Certificate", "netqos-webhook-ca")
    assert ca_issuer["spec"] == {"ca": {"secretName": ca_certificate["spec"]["secretName"]}}
    assert ca_certificate["spec"]["isCA"] is True
    root = one(objs, "Issuer", ca_certificate["spec"]["issuerRef"]["name"])
    assert root["spec"] == {"selfSigned": {}}
    for obj in (serving, ca_certificate, ca_issuer, root):
        assert obj["apiVersion"] == "cert-manager.io/v1"
        assert obj["metadata"]["namespace"] == "netqos-system"


def test_cert_manager_overlay_keeps_the_base(rendered) -> None:
    without_crds = [o for o in rendered["cert-manager"] if not o["apiVersion"].startswith(CRD_GROUPS)]

    def strip(o: dict[str, Any]) -> dict[str, Any]:
        return {**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "annotations"}}

    assert sorted(map(json.dumps, map(strip, without_crds))) == sorted(map(json.dumps, map(strip, rendered["base"])))


def test_dev_overlay_is_only_the_webhook_configuration_pointing_at_a_url(rendered) -> None:
    (config,) = rendered["dev"]
    assert config["kind"] == "MutatingWebhookConfiguration"  # the CA Secret is local-only, dropped
    for webhook in config["webhooks"]:
        assert "service" not in webhook["clientConfig"]
        assert webhook["clientConfig"]["url"] == "https://host.minikube.internal:8443/mutate"
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == rendered["dev-ca"]


def test_dev_overlay_differs_from_base_only_in_client_config(rendered) -> None:
    (dev,) = rendered["dev"]
    base = one(rendered["base"], "MutatingWebhookConfiguration")

    def drop(c: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in w.items() if k != "clientConfig"} for w in c["webhooks"]]

    assert drop(dev) == drop(base)
    assert dev["metadata"] == base["metadata"]


@needs_kubectl
def test_dev_overlay_without_certificates_names_the_missing_file(tmp_path: Path) -> None:
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("certs"))
    done = subprocess.run(
        [KUBECTL, "kustomize", str(copy / "overlays/dev")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "certs/ca.crt" in done.stderr


def test_dev_certificates_are_never_committed() -> None:
    assert "deploy/overlays/dev/certs/" in (REPO / ".gitignore").read_text().splitlines()


# --- examples ----------------------------------------------------------------------------------


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "examples" / name).read_text())


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """Kubernetes' Toleration.ToleratesTaint."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint["effect"]:
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t["key"] == taint["key"]:
                return True
        elif t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def test_fake_node_is_the_experiments_net_high_node_without_a_kubelet() -> None:
    node = example("fake-node.yaml")
    assert node["metadata"]["name"] == "fake-node-1"
    assert node["metadata"]["labels"]["net"] == "high"
    assert node["spec"]["taints"] == [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
    ]
    assert int(node["status"]["allocatable"]["pods"]) > 0  # else NodeResourcesFit filters it out


def test_test_pod_is_the_experiments_pod_and_tolerates_the_fake_node() -> None:
    pod, node = example("test-pod.yaml"), example("fake-node.yaml")
    assert pod["metadata"]["name"] == "qos-demo-pod"
    assert all(tolerates(pod["spec"]["tolerations"], taint) for taint in node["spec"]["taints"])


@pytest.mark.parametrize(
    ("name", "labels_at"),
    [("test-pod.yaml", "metadata.labels"), ("latency-sensitive-deployment.yaml", "spec.template.metadata.labels")],
)
def test_example_workloads_are_selected_by_the_shipped_policy(name: str, labels_at: str) -> None:
    policy = load_policy(DEPLOY / "base/policy.yaml")
    labels = at(example(name), labels_at)
    assert [r.name for r in policy.rules if r.pod_selector.matches(labels)] == ["netqos"]


# --- the image ---------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def test_every_base_image_is_a_slim_python_pinned_to_a_patch_version() -> None:
    # scratch: the final stage, the runtime stage's filesystem copied onto Docker's empty image
    bases = [args.split()[0] for ins, args in dockerfile() if ins == "FROM" and args.split()[0] != "scratch"]
    assert bases, "no FROM in the Dockerfile"
    for image in bases:
        assert re.fullmatch(r"python:3\.\d+\.\d+-slim(-[a-z]+)?", image), (
            f"{image} is not pinned to a slim Python version"
        )


def test_image_runs_as_the_numeric_non_root_user_of_the_deployment(deployment) -> None:
    users = [args for ins, args in dockerfile() if ins == "USER"]
    assert users, "the image would run as root"
    uid, _, gid = users[-1].partition(":")
    context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (int(uid), int(gid)) == (context["runAsUser"], context["runAsGroup"])


def test_image_entrypoint_is_netqos_webhook_serve_and_its_default_args_match_the_deployment(container) -> None:
    instructions = dict(dockerfile())
    assert json.loads(instructions["ENTRYPOINT"]) == ["netqos-webhook", "serve"] == container["command"]
    assert json.loads(instructions["CMD"]) == container["args"]


def test_image_installs_the_package_and_nothing_writes_bytecode_at_run_time() -> None:
    runs = " ".join(args for ins, args in dockerfile() if ins == "RUN")
    # pip's --python goes before the command (pip reads it there only): into the image's venv
    assert re.search(r"\bpip (--python \S+ )?install\b", runs) and ".whl" in runs
    assert "PYTHONDONTWRITEBYTECODE=1" in " ".join(args for ins, args in dockerfile() if ins == "ENV")


def test_dockerignore_keeps_secrets_and_the_venv_out_of_the_build_context() -> None:
    lines = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*"  # deny everything, then allow what the image needs
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert allowed == {"pyproject.toml", "README.md", "webhook"}
    copied = [args.split()[:-1] for ins, args in dockerfile() if ins == "COPY" and "--from" not in args]
    assert {Path(src).as_posix().rstrip("/") for srcs in copied for src in srcs} <= allowed
