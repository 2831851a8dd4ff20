"""`netqos-webhook register`: the objects it builds from a certs directory, its dry run, and what
it sends, through the real `kubernetes` client, to a recording API server on loopback.

The recording server speaks just enough of the API (server-side apply PATCHes) to check the
request a real API server would get: method, path, fieldManager, force, content type and body.
Every address used here is on 127.0.0.1.
"""

from __future__ import annotations

import base64
import datetime as dt
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.kubeapi import ADMISSION_DISCOVERY, Request, ScriptedAPI, discovering, status_body
from tests.fixtures import REPO
from webhook.certs import CertFiles, generate
from webhook.cli import main
from webhook.manifests import webhook_configuration
from webhook.policy_file import load_policy
from webhook.policy_review import validating_configuration
from webhook.register import CertificateError, check_certificates, objects

POLICY = str(REPO / "deploy/base/policy.yaml")
SECRET_PATH = "/api/v1/namespaces/netqos-system/secrets/netqos-webhook-tls"
CONFIG_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/netqos-webhook"
VALIDATING_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/netqos-webhook"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return generate(tmp_path_factory.mktemp("certs"), hosts=["host.minikube.internal"])


@pytest.fixture(autouse=True)
def no_ambient_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test may reach a cluster the machine happens to be configured for."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("NETQOS_CONFIG", raising=False)


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def expected_secret(certs: CertFiles, namespace: str = "netqos-system") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "netqos-webhook-tls",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "netqos-webhook", "app.kubernetes.io/component": "webhook"},
        },
        "type": "kubernetes.io/tls",
        "data": {"ca.crt": b64(certs.ca_cert), "tls.crt": b64(certs.cert), "tls.key": b64(certs.key)},
    }


def expected_config(certs: CertFiles, **options: Any) -> dict[str, Any]:
    return webhook_configuration(load_policy(POLICY), ca_bundle=certs.ca_cert.read_bytes(), **options)


def expected_validating(certs: CertFiles, namespace: str = "netqos-system") -> dict[str, Any]:
    """The check of the policy ConfigMap (webhook/policy_review.py), with the same caBundle."""
    return validating_configuration(namespace, ca_bundle=certs.ca_cert.read_bytes())


# --- certificates ------------------------------------------------------------------------------


def test_certificates_for_the_service_pass(certs: CertFiles) -> None:
    checked = check_certificates(certs, "netqos-system")
    assert (checked.ca_cert, checked.cert, checked.key) == (
        certs.ca_cert.read_bytes(),
        certs.cert.read_bytes(),
        certs.key.read_bytes(),
    )


def _broken(tmp: Path, certs: CertFiles, case: str) -> CertFiles:
    out = CertFiles(tmp / case)
    out.directory.mkdir()
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (out.directory / name).write_bytes((certs.directory / name).read_bytes())
    other = generate(tmp / f"{case}-other")
    if case == "missing-key":
        out.key.unlink()
    elif case == "foreign-key":
        out.key.write_bytes(other.key.read_bytes())
    elif case == "other-ca":
        out.ca_cert.write_bytes(other.ca_cert.read_bytes())
    elif case == "not-pem":
        out.cert.write_text("hello\n")
    elif case == "other-namespace":
        generate(out.directory, namespace="elsewhere")
    return out


@pytest.mark.parametrize(
    ("case", "message"),
    [
        (
            "missing-key",
            "missing {dir}/tls.key; make new ones with "
            "'netqos-webhook certs --out {dir} --namespace netqos-system --force'",
        ),
        ("foreign-key", "{dir}/tls.key is not the key of {dir}/tls.crt"),
        ("other-ca", "{dir}/tls.crt was not issued by the CA in {dir}/ca.crt"),
        ("not-pem", "{dir}/tls.crt is not a PEM certificate"),
        (
            "other-namespace",
            "{dir}/tls.crt does not name netqos-webhook.netqos-system.svc, the host the API server connects to",
        ),
    ],
)
def test_unusable_certificates_name_the_file_and_the_fix(
    tmp_path: Path, certs: CertFiles, case: str, message: str
) -> None:
    broken = _broken(tmp_path, certs, case)
    with pytest.raises(CertificateError) as err:
        check_certificates(broken, "netqos-system")
    assert message.format(dir=broken.directory) in str(err.value)
    assert main(["register", "--dry-run", "--certs", str(broken.directory), "--config", POLICY]) == 2


def test_expired_certificates_are_refused(certs: CertFiles) -> None:
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    with pytest.raises(CertificateError, match=r"tls.crt expired on .* UTC"):
        check_certificates(certs, "netqos-system", now=later)


def test_for_a_url_the_certificate_must_name_the_urls_host(certs: CertFiles) -> None:
    check_certificates(certs, "netqos-system", url="https://host.minikube.internal:8443/mutate")
    with pytest.raises(CertificateError, match="does not name 192.168.49.1.*--host 192.168.49.1"):
        check_certificates(certs, "netqos-system", url="https://192.168.49.1:8443/mutate")


# --- objects -----------------------------------------------------------------------------------


def test_objects_are_the_tls_secret_then_the_configuration_with_the_ca_bundle(certs: CertFiles) -> None:
    objs = objects(load_policy(POLICY), check_certificates(certs, "netqos-system"), "netqos-system")
    assert objs == [expected_secret(certs), expected_config(certs), expected_validating(certs)]


def test_objects_for_a_url_are_only_the_configuration(certs: CertFiles) -> None:
    url = "https://host.minikube.internal:8443/mutate"
    objs = objects(load_policy(POLICY), check_certificates(certs, "netqos-system", url=url), "netqos-system", url=url)
    assert objs == [expected_config(certs, url=url)]


# --- dry run -----------------------------------------------------------------------------------


def test_dry_run_prints_the_objects_and_contacts_nothing(certs: CertFiles, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["register", "--dry-run", "--certs", str(certs.directory), "--config", POLICY]) == 0
    captured = capsys.readouterr()
    assert list(yaml.safe_load_all(captured.out)) == [
        expected_secret(certs),
        expected_config(certs),
        expected_validating(certs),
    ]
    assert f"the Secret above holds the private key from {certs.key}" in captured.err


def test_dry_run_in_another_namespace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = generate(tmp_path, namespace="platform")
    assert main(["register", "--dry-run", "--certs", str(tmp_path), "--namespace", "platform", "--config", POLICY]) == 0
    secret, config, validating = yaml.safe_load_all(capsys.readouterr().out)
    assert secret == expected_secret(files, "platform")
    assert config == expected_config(files, namespace="platform")
    assert validating == expected_validating(files, "platform")


def test_dry_run_without_certificates_generates_nothing_and_says_how(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "certs"
    assert main(["register", "--dry-run", "--certs", str(empty)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"make new ones with 'netqos-webhook certs --out {empty} --namespace netqos-system'" in captured.err
    assert not empty.exists()


def test_register_help_has_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["register", "--help"])
    assert "example:\n  netqos-webhook register" in capsys.readouterr().out


# --- talking to a cluster ----------------------------------------------------------------------


def kubeconfig(tmp_path: Path, server: str) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "test", "cluster": {"server": server}}],
                "users": [{"name": "test", "user": {"token": "test-token"}}],
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "current-context": "test",
            }
        )
    )
    return path


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the with block ends


def applying_api(fail: tuple[int, str, str] | None = None) -> ScriptedAPI:
    """A loopback API server answering its discovery, and PATCH like one doing server-side apply:
    201 the first time a path is applied, then 200; or `fail` = (status, reason, message) for
    every PATCH. `patches` are the PATCH requests it received."""
    seen: set[str] = set()

    def answer(request: Request) -> tuple[int, Any]:
        if request.method == "GET":  # nothing registered yet
            return 404, status_body(404, "NotFound", "not found")
        if fail:
            return fail[0], status_body(*fail)
        code = 200 if request.path in seen else 201
        seen.add(request.path)
        return code, request.json()

    return _Applying(discovering(answer))


class _Applying(ScriptedAPI):
    @property
    def patches(self) -> list[Request]:
        return [r for r in self.requests if r.method == "PATCH"]


def test_register_server_side_applies_the_secret_then_the_configuration(
    tmp_path: Path, certs: CertFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    with applying_api() as api:
        config = str(kubeconfig(tmp_path, api.url))
        args = ["register", "--kubeconfig", config, "--certs", str(certs.directory), "--config", POLICY]
        assert main(args) == 0
        first = capsys.readouterr()
        assert main(args) == 0
        second = capsys.readouterr()
    assert [(r.path, r.json()) for r in api.patches[:2]] == [
        (SECRET_PATH, expected_secret(certs)),
        (CONFIG_PATH, expected_config(certs)),
    ]
    for request in api.patches:
        assert request.headers["Content-Type"] == "application/apply-patch+yaml"
        assert request.query["fieldManager"] == ["netqos-webhook"]
        # the API server parses it with Go's strconv.ParseBool; older clients send "True"
        assert request.query["force"] in (["true"], ["True"])
        assert set(request.query) == {"fieldManager", "force"}
        assert request.headers["Authorization"] == "Bearer test-token"
    assert (api.patches[2].path, api.patches[2].json()) == (VALIDATING_PATH, expected_validating(certs))
    assert first.out.splitlines() == [
        "secret/netqos-webhook-tls in namespace netqos-system created (server-side apply)",
        "mutatingwebhookconfiguration/netqos-webhook created (server-side apply)",
        "validatingwebhookconfiguration/netqos-webhook created (server-side apply)",
    ]
    assert second.out.splitlines() == [
        "secret/netqos-webhook-tls in namespace netqos-system configured (server-side apply)",
        "mutatingwebhookconfiguration/netqos-webhook configured (server-side apply)",
        "validatingwebhookconfiguration/netqos-webhook configured (server-side apply)",
    ]


def test_register_with_a_url_sends_no_secret(
    tmp_path: Path, certs: CertFiles, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "https://host.minikube.internal:8443/mutate"
    with applying_api() as api:
        args = [
            "register",
            "--kubeconfig",
            str(kubeconfig(tmp_path, api.url)),
            "--certs",
            str(certs.directory),
            "--url",
            url,
        ]
        assert main(args) == 0
    assert [(r.path, r.json()) for r in api.patches] == [(CONFIG_PATH, expected_config(certs, url=url))]


def test_register_without_certificates_generates_them_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "new-certs"
    with applying_api() as api:
        assert main(["register", "--kubeconfig", str(kubeconfig(tmp_path, api.url)), "--certs", str(target)]) == 0
    files = CertFiles(target)
    check_certificates(files, "netqos-system")
    assert api.patches[0].json()["data"]["tls.crt"] == b64(files.cert)
    assert f"generated a CA and a server certificate in {target}/" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("fail", "expected"),
    [
        (
            (
                403,
                "Forbidden",
                'secrets "netqos-webhook-tls" is forbidden: User "dev" cannot patch resource "secrets" '
                'in API group "" in the namespace "netqos-system"',
            ),
            "refused to apply secret/netqos-webhook-tls in namespace netqos-system: HTTP 403 Forbidden: "
            'secrets "netqos-webhook-tls" is forbidden: User "dev" cannot patch',
        ),
        (
            (403, "Forbidden", "forbidden"),
            "needs the verbs create and patch on secrets in namespace netqos-system "
            "(kubectl auth can-i patch secrets -n netqos-system)",
        ),
        (
            (401, "Unauthorized", "Unauthorized"),
            "HTTP 401 Unauthorized; the credentials were rejected: log in again or pick another --context",
        ),
        (
            (404, "NotFound", 'namespaces "netqos-system" not found'),
            "create the namespace first: 'kubectl apply -k deploy/base'",
        ),
        (
            (
                422,
                "Invalid",
                'Secret "netqos-webhook-tls" is invalid: type: Invalid value: "kubernetes.io/tls": field is immutable',
            ),
            "field is immutable",
        ),
    ],
)
def test_api_errors_are_one_clear_message_and_exit_1(
    tmp_path: Path, certs: CertFiles, capsys, fail, expected: str
) -> None:
    with applying_api(fail=fail) as api:
        code = main(["register", "--kubeconfig", str(kubeconfig(tmp_path, api.url)), "--certs", str(certs.directory)])
    captured = capsys.readouterr()
    assert code == 1
    assert expected in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert captured.out == ""
    assert len(api.patches) == 1  # it stops at the first refusal


# what answers at the kubeconfig's server: (status, body, headers), and what the one line says of it
NOT_AN_API_SERVER = {
    "a login page": (
        (200, b"<!doctype html><title>Sign in</title><form>...</form>", {"Content-Type": "text/html; charset=utf-8"}),
        "answered HTTP 200 with 53 bytes of text/html",
    ),
    "a redirect to a login page": ((302, b"", {"Location": "/login"}), "it redirected to /login (HTTP 302)"),
    "a proxy answering 200 to everything": ((200, b"OK", {"Content-Type": "text/plain"}), "2 bytes of text/plain"),
    "a proxy answering {} to everything": ((200, {}, {}), "answered HTTP 200 with JSON of another shape"),
}


@pytest.mark.parametrize("server", NOT_AN_API_SERVER, ids=list(NOT_AN_API_SERVER))
def test_a_server_that_is_not_an_api_server_is_named_and_nothing_is_generated_or_sent(
    tmp_path: Path, capsys, server: str
) -> None:
    answer, said = NOT_AN_API_SERVER[server]
    with ScriptedAPI(lambda request: answer) as api:
        target = tmp_path / "new-certs"
        code = main(["register", "--kubeconfig", str(kubeconfig(tmp_path, api.url)), "--certs", str(target)])
    captured = capsys.readouterr()
    assert code == 1
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert f"the server at {api.url} (kubeconfig {tmp_path}/kubeconfig) is not a Kubernetes API server" in captured.err
    assert said in captured.err
    assert not target.exists(), "no certificates before the kubeconfig has proved usable"
    assert [(r.method, r.path.rstrip("/")) for r in api.requests] == [("GET", ADMISSION_DISCOVERY)]


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_unreachable_cluster_is_one_clear_message_and_exit_1(
    tmp_path: Path, certs: CertFiles, capsys, scheme: str
) -> None:
    server = f"{scheme}://127.0.0.1:{closed_port()}"
    code = main(["register", "--kubeconfig", str(kubeconfig(tmp_path, server)), "--certs", str(certs.directory)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.startswith(
        f"netqos-webhook register: cannot reach the Kubernetes API server at {server} "
        f"(kubeconfig {tmp_path}/kubeconfig): "
    )
    assert "Connection refused" in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--kubeconfig", "{tmp}/absent"],
            "cannot read kubeconfig {tmp}/absent: No such file or directory; check the path",
        ),
        (
            ["--kubeconfig", "{tmp}/kubeconfig", "--context", "prod"],
            "cannot use kubeconfig {tmp}/kubeconfig, context prod: ",
        ),
        ([], "no kubeconfig: ~/.kube/config does not exist, and this is not a pod in a cluster"),
    ],
)
def test_unusable_kubeconfig_is_exit_2(
    tmp_path: Path, certs: CertFiles, capsys, monkeypatch, args: list[str], message: str
) -> None:
    kubeconfig(tmp_path, "https://127.0.0.1:1")
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    code = main(["register", "--certs", str(certs.directory), *[a.format(tmp=tmp_path) for a in args]])
    captured = capsys.readouterr()
    assert code == 2
    assert message.format(tmp=tmp_path) in captured.err
    assert len(captured.err.strip().splitlines()) == 1


def test_a_kubeconfig_that_is_not_yaml_is_exit_2(tmp_path: Path, certs: CertFiles, capsys) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: [unclosed\n")
    code = main(["register", "--kubeconfig", str(bad), "--certs", str(certs.directory)])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.startswith(f"netqos-webhook register: cannot use kubeconfig file {bad}: not valid YAML")
    assert len(captured.err.strip().splitlines()) == 1


def test_kubeconfig_variable_naming_a_missing_file_is_named(
    certs: CertFiles, capsys, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nowhere"))
    assert main(["register", "--certs", str(certs.directory)]) == 2
    assert f"no kubeconfig: $KUBECONFIG ({tmp_path / 'nowhere'}) does not exist" in capsys.readouterr().err


def test_in_a_pod_without_a_kubeconfig_it_uses_the_service_account(
    certs: CertFiles, capsys, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(closed_port()))
    # No token is mounted on this machine: the in-cluster loader says so, as one message.
    code = main(["register", "--certs", str(certs.directory)])
    captured = capsys.readouterr()
    assert code == 2
    assert "cannot use the in-cluster service account: " in captured.err


# --- what the cluster holds already ------------------------------------------------------------

DEPLOYMENT_PATH = "/apis/apps/v1/namespaces/netqos-system/deployments/netqos-webhook"
POLICY_MAP = "netqos-webhook-policy-7bk2"
TWO_RULES = REPO / "tests/fixtures/policy-two-tables.yaml"


def installed_objects(
    ca: CertFiles | None = None, bundle: CertFiles | None = None, policy: Path | None = None
) -> dict[str, Any]:
    """GET paths of a cluster where the webhook is installed: the TLS Secret made from `ca`'s
    files, the registration trusting `bundle`'s CA, the Deployment serving `policy` from its
    ConfigMap (each left out when None)."""
    objs: dict[str, Any] = {}
    if ca is not None:
        objs[SECRET_PATH] = expected_secret(ca)
    if bundle is not None:
        objs[CONFIG_PATH] = expected_config(bundle)
    if policy is not None:
        deployment = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
        deployment["spec"]["template"]["spec"]["volumes"][1]["configMap"]["name"] = POLICY_MAP
        objs[DEPLOYMENT_PATH] = deployment
        objs[f"/api/v1/namespaces/netqos-system/configmaps/{POLICY_MAP}"] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": POLICY_MAP, "namespace": "netqos-system"},
            "data": {"policy.yaml": policy.read_text()},
        }
    return objs


FORBIDDEN = "forbidden"  # what `holding_api` answers 403 to a GET of


def holding_api(objs: dict[str, Any]) -> _Applying:
    """A loopback API server that answers GETs of `objs` (404 for anything else) and applies."""

    def answer(request: Request) -> tuple[int, Any]:
        if request.method == "GET":
            found = objs.get(request.path)
            if found == FORBIDDEN:
                return 403, status_body(403, "Forbidden", "forbidden")
            return (200, found) if found is not None else (404, status_body(404, "NotFound", "not found"))
        return 201, request.json()

    return _Applying(discovering(answer))


def register(tmp_path: Path, api: ScriptedAPI, *args: str) -> int:
    return main(["register", "--kubeconfig", str(kubeconfig(tmp_path, api.url)), *args])


def ca_line(err: str, where: str, ca: CertFiles) -> bool:
    """The refusal: one line naming where the CA was found and its fingerprint, and the ways out."""
    from cryptography import x509

    from webhook.certs import fingerprint

    shown = fingerprint(x509.load_pem_x509_certificate(ca.ca_cert.read_bytes()))
    return (
        len(err.strip().splitlines()) == 1
        and f"netqos-webhook register: {where} holds the CA SHA-256 {shown}" in err
        and "--new-ca" in err
        and "--force" in err
    )


@pytest.mark.parametrize(
    ("held", "where"),
    [
        ("secret", "Secret netqos-system/netqos-webhook-tls (its ca.crt)"),
        ("registration", "MutatingWebhookConfiguration netqos-webhook (its caBundle)"),
    ],
)
def test_without_certificates_a_ca_the_cluster_holds_is_refused_not_replaced(
    tmp_path: Path, certs: CertFiles, capsys, held: str, where: str
) -> None:
    objs = installed_objects(ca=certs) if held == "secret" else installed_objects(bundle=certs)
    elsewhere = tmp_path / "elsewhere"
    with holding_api(objs) as api:
        code = register(tmp_path, api, "--certs", str(elsewhere))
    assert code == 2
    assert ca_line(capsys.readouterr().err, where, certs)
    assert api.patches == [] and not elsewhere.exists()


def test_a_secret_it_may_not_read_is_refused_unless_forced(tmp_path: Path, certs: CertFiles, capsys) -> None:
    with holding_api({SECRET_PATH: FORBIDDEN}) as api:
        code = register(tmp_path, api, "--certs", str(certs.directory))
        err = capsys.readouterr().err
        assert register(tmp_path, api, "--certs", str(certs.directory), "--force") == 0
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot read Secret netqos-webhook-tls in namespace netqos-system (forbidden)" in err
    assert [r.path for r in api.patches] == [SECRET_PATH, CONFIG_PATH, VALIDATING_PATH]  # the forced run's


def test_certificates_of_another_ca_are_refused(tmp_path: Path, certs: CertFiles, capsys) -> None:
    other = generate(tmp_path / "other")
    with holding_api(installed_objects(ca=certs, bundle=certs)) as api:
        code = register(tmp_path, api, "--certs", str(other.directory))
    assert code == 2
    assert ca_line(capsys.readouterr().err, "Secret netqos-system/netqos-webhook-tls (its ca.crt)", certs)
    assert api.patches == []


def test_a_rollover_bundle_that_keeps_the_clusters_ca_is_registered(tmp_path: Path, capsys) -> None:
    rolled = generate(tmp_path / "rolled")
    trusted = CertFiles(tmp_path / "trusted")
    trusted.directory.mkdir()
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (trusted.directory / name).write_bytes((rolled.directory / name).read_bytes())
    generate(rolled.directory, keep_previous_ca=True)  # certs --new-ca: ca-bundle.crt = new + trusted
    with holding_api(installed_objects(ca=trusted, bundle=trusted)) as api:
        assert register(tmp_path, api, "--certs", str(rolled.directory)) == 0
    sent = [r.json() for r in api.patches]
    assert sent[0]["webhooks"][0]["clientConfig"]["caBundle"] == b64(rolled.ca_bundle)


def test_force_replaces_a_ca_the_cluster_holds(tmp_path: Path, certs: CertFiles, capsys) -> None:
    fresh = tmp_path / "fresh"
    with holding_api(installed_objects(ca=certs, bundle=certs)) as api:
        assert register(tmp_path, api, "--certs", str(fresh), "--force") == 0
    assert [r.path for r in api.patches] == [SECRET_PATH, CONFIG_PATH, VALIDATING_PATH]
    assert api.patches[0].json()["data"]["ca.crt"] == b64(CertFiles(fresh).ca_cert)


def test_the_same_ca_is_registered_again(tmp_path: Path, certs: CertFiles, capsys) -> None:
    with holding_api(installed_objects(ca=certs, bundle=certs)) as api:
        assert register(tmp_path, api, "--certs", str(certs.directory)) == 0
    assert len(api.patches) == 3  # the Secret, the mutating and the validating configuration


def entries(api: _Applying) -> list[str]:
    config = next(r.json() for r in api.patches if r.path == CONFIG_PATH)
    return [w["name"] for w in config["webhooks"]]


def test_without_config_the_installed_policys_rules_are_registered(tmp_path: Path, certs: CertFiles, capsys) -> None:
    with holding_api(installed_objects(policy=TWO_RULES)) as api:
        assert register(tmp_path, api, "--certs", str(certs.directory)) == 0
    assert entries(api) == ["netqos.netqos.io", "batch.netqos.io"]
    assert f"the rules of ConfigMap netqos-system/{POLICY_MAP} key policy.yaml" in capsys.readouterr().err


def test_a_config_that_differs_from_the_installed_policy_is_refused_naming_the_rules(
    tmp_path: Path, certs: CertFiles, capsys
) -> None:
    with holding_api(installed_objects(policy=TWO_RULES)) as api:
        code = register(tmp_path, api, "--certs", str(certs.directory), "--config", POLICY)
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert (
        f"--config {POLICY} differs from the policy the webhook serves (ConfigMap netqos-system/{POLICY_MAP} key "
        "policy.yaml) in the rules batch (only installed): "
    ) in err
    assert api.patches == []


def test_a_config_equal_to_the_installed_policy_or_forced_is_registered(
    tmp_path: Path, certs: CertFiles, capsys
) -> None:
    with holding_api(installed_objects(policy=Path(POLICY))) as api:
        assert register(tmp_path, api, "--certs", str(certs.directory), "--config", POLICY) == 0
    with holding_api(installed_objects(policy=TWO_RULES)) as api:
        assert register(tmp_path, api, "--certs", str(certs.directory), "--config", POLICY, "--force") == 0
    assert entries(api) == ["netqos.netqos.io"]


def test_register_help_documents_force(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["register", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--force register even when it replaces what the cluster holds" in shown
