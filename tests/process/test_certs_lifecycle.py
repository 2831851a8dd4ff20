"""Certificates over their life: a 10-year CA from every command that makes one, renewals under
it from any of their directories, and a CA that is only replaced on purpose."""

from __future__ import annotations

import base64
import datetime as dt
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from harness.kubeapi import Request, ScriptedAPI, discovering, status_body
from harness.server import start_server
from tests.fixtures import fixture
from webhook.certs import CertFiles

CA_DAYS = 3650
CERT_DAYS = 365


def netqos(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "", "KUBECONFIG": "/nonexistent/kubeconfig"},
    )


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def lifetime_days(cert: x509.Certificate) -> int:
    return (cert.not_valid_after_utc - cert.not_valid_before_utc).days


def made_by_serve(tmp: Path) -> Path:
    """serve's development pair: made in ./certs before the listening address is checked (taken here)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = netqos("serve", "--bind", f"127.0.0.1:{taken.getsockname()[1]}", "--log-format", "text", cwd=tmp)
    assert done.returncode == 1 and "cannot listen" in done.stderr, done.stderr
    return tmp / "certs"


def made_by_register(tmp: Path) -> Path:
    """register's pair: generated into --certs once its kubeconfig has proved usable (its server
    answers discovery as an API server does) and it has read that the cluster holds no CA yet,
    before it sends anything (refused here)."""

    def answer(request: Request) -> tuple[int, bytes]:
        if request.method == "GET":  # nothing installed: no Secret, no registration
            return 404, status_body(404, "NotFound", "not found")
        return 403, status_body(403, "Forbidden", "forbidden")

    api = ScriptedAPI(discovering(answer))
    with api:
        kubeconfig = api.kubeconfig(tmp)
        done = netqos("register", "--certs", str(tmp / "reg"), "--kubeconfig", str(kubeconfig), cwd=tmp)
    assert done.returncode == 1 and "refused to apply" in done.stderr, done.stderr
    assert "generated a CA and a server certificate" in done.stderr, done.stderr
    return tmp / "reg"


def made_by_certs(tmp: Path) -> Path:
    done = netqos("certs", "--out", str(tmp / "out"))
    assert done.returncode == 0, done.stderr
    return tmp / "out"


MAKERS = {"serve": made_by_serve, "register": made_by_register, "certs": made_by_certs}


@pytest.mark.parametrize("command", MAKERS)
def test_every_command_makes_a_ten_year_ca_and_a_one_year_server_certificate(tmp_path, command):
    files = CertFiles(MAKERS[command](tmp_path))
    assert lifetime_days(load(files.ca_cert)) == CA_DAYS
    assert lifetime_days(load(files.cert)) == CERT_DAYS


@pytest.mark.parametrize("command", MAKERS)
def test_renew_before_reissues_under_the_same_ca_in_the_directory_of_every_command(tmp_path, command):
    files = CertFiles(MAKERS[command](tmp_path))
    ca_before, cert_before = files.ca_cert.read_bytes(), load(files.cert)
    done = netqos("certs", "--out", str(files.directory), "--renew-before", str(CERT_DAYS + 1))
    assert done.returncode == 0 and done.stdout.startswith(f"renewed {files.cert}"), done.stderr
    renewed = load(files.cert)
    assert files.ca_cert.read_bytes() == ca_before, "the caBundle stays valid"
    assert renewed.serial_number != cert_before.serial_number
    renewed.verify_directly_issued_by(load(files.ca_cert))
    assert lifetime_days(renewed) == CERT_DAYS


@pytest.fixture
def existing(tmp_path) -> CertFiles:
    return CertFiles(made_by_certs(tmp_path))


def snapshot(files: CertFiles) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in files.directory.iterdir()}


def test_certs_refuses_to_replace_an_existing_ca_and_says_what_to_run(existing):
    before = snapshot(existing)
    done = netqos("certs", "--out", str(existing.directory))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert f"netqos-webhook certs --out {existing.directory} --renew-before 30" in done.stderr
    assert "--new-ca" in done.stderr and "--force" in done.stderr
    assert snapshot(existing) == before, "nothing is written"


def test_force_replaces_the_ca_and_trusts_only_the_new_one(existing):
    old_ca = existing.ca_cert.read_bytes()
    done = netqos("certs", "--out", str(existing.directory), "--force")
    assert done.returncode == 0, done.stderr
    assert existing.ca_cert.read_bytes() != old_ca and not existing.ca_bundle.exists()


def test_new_ca_keeps_the_previous_ca_in_the_bundle_beside_the_new_one(existing):
    old_ca = load(existing.ca_cert)
    done = netqos("certs", "--out", str(existing.directory), "--new-ca")
    assert done.returncode == 0, done.stderr
    new_ca = load(existing.ca_cert)
    assert new_ca != old_ca
    assert x509.load_pem_x509_certificates(existing.ca_bundle.read_bytes()) == [new_ca, old_ca]
    load(existing.cert).verify_directly_issued_by(new_ca)
    assert str(existing.ca_bundle) in done.stdout


def test_a_second_new_ca_before_the_rollover_is_finished_keeps_every_ca_the_cluster_may_trust(existing, tmp_path):
    """The cluster's caBundle may still be the first CA alone (register not run yet) while its
    servers serve the first certificate: a second --new-ca keeps that CA in the bundle, and a
    real server on the first certificate is verified by the bundle the rollover publishes."""
    first_ca = load(existing.ca_cert)
    serving = CertFiles(tmp_path / "serving")
    shutil.copytree(existing.directory, serving.directory)  # what the running pods still serve
    assert netqos("certs", "--out", str(existing.directory), "--new-ca").returncode == 0
    second_ca = load(existing.ca_cert)
    done = netqos("certs", "--out", str(existing.directory), "--new-ca")
    assert done.returncode == 0, done.stderr
    third_ca = load(existing.ca_cert)
    assert x509.load_pem_x509_certificates(existing.ca_bundle.read_bytes()) == [third_ca, second_ca, first_ca]
    with start_server(tmp_path / "server", certs=serving, workers=1) as srv:
        conn = srv.connect(cafile=existing.ca_bundle)
        assert srv.review(fixture("review-create-defaulted-pod.json"), conn)["response"]["allowed"] is True


def test_new_ca_refuses_an_unreadable_rollover_bundle_rather_than_drop_it(existing):
    existing.ca_bundle.write_text("not a certificate\n")
    before = snapshot(existing)
    done = netqos("certs", "--out", str(existing.directory), "--new-ca")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"{existing.ca_bundle} (an unfinished CA rollover) holds no readable PEM certificate" in done.stderr
    assert snapshot(existing) == before, "nothing is written"


def test_register_publishes_the_bundle_as_ca_bundle_before_the_secret_during_a_rollover(existing):
    assert netqos("certs", "--out", str(existing.directory), "--new-ca").returncode == 0
    done = netqos("register", "--certs", str(existing.directory), "--dry-run")
    assert done.returncode == 0, done.stderr
    config, validating, secret = list(yaml.safe_load_all(done.stdout))
    kinds = (config["kind"], validating["kind"], secret["kind"])
    assert kinds == ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Secret")
    bundles = {base64.b64decode(w["clientConfig"]["caBundle"]) for w in config["webhooks"] + validating["webhooks"]}
    assert bundles == {existing.ca_bundle.read_bytes()}
    assert base64.b64decode(secret["data"]["ca.crt"]) == existing.ca_cert.read_bytes()


def test_a_bundle_without_the_signing_ca_is_refused(existing, tmp_path):
    other = CertFiles(made_by_certs(tmp_path / "other"))
    existing.ca_bundle.write_bytes(other.ca_cert.read_bytes())
    done = netqos("register", "--certs", str(existing.directory), "--dry-run")
    assert done.returncode == 2 and "does not hold the CA in" in done.stderr and "Traceback" not in done.stderr


def test_a_ca_due_within_the_window_points_at_the_rollover(tmp_path):
    from webhook.certs import generate

    files = generate(tmp_path / "short", days=10, ca_days=20)
    done = netqos("certs", "--out", str(files.directory), "--renew-before", "30")
    assert done.returncode == 2 and f"netqos-webhook certs --out {files.directory} --new-ca" in done.stderr
    assert dt.datetime.now(dt.UTC) < load(files.ca_cert).not_valid_after_utc


# --- asking for certificates that could not work: refused, nothing written -------------------------

REFUSED = [
    # arguments after --out DIR, what the one line says
    (["--ca-days", "10", "--days", "365"], "a CA of 10 days cannot sign a server certificate of 365 days"),
    (["--ca-days", "365", "--days", "365"], "give --ca-days more than --days"),
    (["--service", "Bad_Name"], "--service 'Bad_Name' is not a valid name: a DNS-1035 label must consist of"),
    (["--service", "1st"], "--service '1st' is not a valid name"),
    (["--namespace", ""], "--namespace '' is not a valid name: a lowercase RFC 1123 label must consist of"),
    (["--namespace", "ns\n"], "--namespace 'ns\\n' is not a valid name"),
    (["--host", "bad host!"], "--host 'bad host!' is neither an IP address nor a DNS name"),
    (["--host", "h\u00e9.example"], "--host 'h\u00e9.example' is neither an IP address nor a DNS name"),
    (["--host", "a..b"], "--host 'a..b' is neither an IP address nor a DNS name"),
]


@pytest.mark.parametrize("args, fragment", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_certificate_that_could_not_work_is_refused_before_anything_is_written(tmp_path, args, fragment):
    done = netqos("certs", "--out", str(tmp_path / "out"), *args)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert fragment in done.stderr
    assert not (tmp_path / "out").exists()


def test_every_bad_name_is_named_at_once(tmp_path):
    done = netqos(
        "certs", "--out", str(tmp_path / "out"), "--host", "bad host!", "--service", "Bad_Name", "--namespace", ""
    )
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert all(flag in done.stderr for flag in ("--service 'Bad_Name'", "--namespace ''", "--host 'bad host!'"))


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "host.minikube.internal", "Host.Example.COM", "*.example.com"])
def test_ip_addresses_dns_names_and_wildcards_are_hosts(tmp_path, host):
    done = netqos("certs", "--out", str(tmp_path / "out"), "--host", host)
    assert done.returncode == 0, done.stderr
    names = load(tmp_path / "out" / "tls.crt").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert host in [str(n.value) for n in names]


def test_a_renewal_the_ca_would_not_outlive_is_refused(existing):
    before = snapshot(existing)
    done = netqos("certs", "--out", str(existing.directory), "--renew-before", "400", "--days", "3700")
    assert done.returncode == 2 and "before a server certificate of 3700 days would" in done.stderr, done.stderr
    assert f"netqos-webhook certs --out {existing.directory} --new-ca" in done.stderr
    assert snapshot(existing) == before


def test_out_naming_a_file_is_not_a_directory(tmp_path):
    (tmp_path / "file").write_text("mine\n")
    done = netqos("certs", "--out", str(tmp_path / "file"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert f"--out {tmp_path / 'file'} is not a directory" in done.stderr
    assert (tmp_path / "file").read_text() == "mine\n"


def test_a_certificate_and_key_without_a_ca_are_not_replaced_unless_forced(tmp_path):
    """Files from elsewhere (cert-manager's Secret copied out): certs must not write over them."""
    elsewhere = CertFiles(made_by_certs(tmp_path / "elsewhere"))
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("tls.crt", "tls.key"):
        (mine / name).write_bytes((elsewhere.directory / name).read_bytes())
    before = snapshot(CertFiles(mine))
    done = netqos("certs", "--out", str(mine))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert "holds tls.crt/tls.key but no CA" in done.stderr and "--force" in done.stderr
    assert snapshot(CertFiles(mine)) == before
    assert netqos("certs", "--out", str(mine), "--force").returncode == 0
    assert (mine / "tls.crt").read_bytes() != before["tls.crt"]


def test_a_ca_certificate_without_its_key_gets_advice_that_leads_somewhere(existing):
    existing.ca_key.unlink()
    refused = netqos("certs", "--out", str(existing.directory))
    renewing = netqos("certs", "--out", str(existing.directory), "--renew-before", "30")
    for done in (refused, renewing):
        assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
        assert "ca.crt without ca.key" in done.stderr
        assert f"'netqos-webhook certs --out {existing.directory} --new-ca'" in done.stderr
        assert f"create one with 'netqos-webhook certs --out {existing.directory}'" not in done.stderr
    assert netqos("certs", "--out", str(existing.directory), "--new-ca").returncode == 0  # the advice works


# --- register: the fix that keeps the caBundle, warnings, nothing written without a cluster --------


def test_register_suggests_renewing_under_the_same_ca_and_the_suggestion_works(existing):
    """The certificate lacks the name for namespace `other`; the CA is fine: renew, never a new CA."""
    ca_before = existing.ca_cert.read_bytes()
    done = netqos("register", "--certs", str(existing.directory), "--namespace", "other", "--dry-run")
    assert done.returncode == 2 and "--force" not in done.stderr and "--new-ca" not in done.stderr, done.stderr
    suggested = done.stderr.split("'")[-2]
    assert suggested == (
        f"netqos-webhook certs --out {existing.directory} --renew-before 30 --host netqos-webhook.other.svc"
    )
    assert netqos(*suggested.split()[1:]).returncode == 0
    done = netqos("register", "--certs", str(existing.directory), "--namespace", "other", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert existing.ca_cert.read_bytes() == ca_before, "the caBundle the cluster trusts stays"


def test_register_dry_run_warns_about_a_certificate_that_expires_soon(tmp_path):
    from webhook.certs import generate

    files = generate(tmp_path / "soon", days=1)
    done = netqos("register", "--certs", str(files.directory), "--dry-run")
    assert done.returncode == 0, done.stderr
    (warning,) = [line for line in done.stderr.splitlines() if line.startswith("Warning: ")]
    assert f"{files.cert} expires on" in warning and "(0 days left)" in warning
    assert f"'netqos-webhook certs --out {files.directory} --renew-before 30" in warning


def test_register_without_a_kubeconfig_writes_no_certificate(tmp_path):
    done = netqos("register", "--certs", str(tmp_path / "certs"), cwd=tmp_path)
    assert done.returncode == 2 and "no kubeconfig" in done.stderr, done.stderr
    assert not (tmp_path / "certs").exists()


def test_the_command_register_suggests_for_a_pair_without_a_ca_works_as_printed(existing):
    existing.ca_cert.unlink()
    existing.ca_key.unlink()
    done = netqos("register", "--certs", str(existing.directory), "--dry-run")
    assert done.returncode == 2, done.stderr
    suggested = done.stderr.split("'netqos-webhook ", 1)[1].split("'", 1)[0]
    made = netqos(*suggested.split())
    assert made.returncode == 0, made.stderr
    assert netqos("register", "--certs", str(existing.directory), "--dry-run").returncode == 0
