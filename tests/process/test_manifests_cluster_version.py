"""`manifests --as admission-policy` makes the objects for the cluster's own Kubernetes version (its
/version, read from the fake API server) when given one, and for the newest known without one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from harness import kubeapi
from webhook import cli

V1, V1BETA1 = "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1"
V1_34 = {"major": "1", "minor": "34", "gitVersion": "v1.34.4"}
V1_37 = {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}


def api_versions(stdout: str) -> set[str]:
    return {obj["apiVersion"] for obj in yaml.safe_load_all(stdout) if obj}


@pytest.mark.parametrize(
    ("reports", "flags", "environment", "api_version", "header", "note"),
    [
        # a 1.34 cluster serves the beta API only: v1 objects would fail there
        pytest.param(
            V1_34,
            ("--kubeconfig", "{kubeconfig}"),
            False,
            V1BETA1,
            "--kubernetes-version 1.34",
            "Note: the objects are for Kubernetes 1.34, the cluster's (the API server's /version (v1.34.4))\n",
            id="kubeconfig-1.34",
        ),
        pytest.param(
            V1_34,
            ("--context", "fake"),
            True,
            V1BETA1,
            "--kubernetes-version 1.34",
            "Note: the objects are for Kubernetes 1.34, the cluster's (the API server's /version (v1.34.4))\n",
            id="context-of-KUBECONFIG-1.34",
        ),
        pytest.param(
            V1_34,
            (),
            True,
            V1BETA1,
            "--kubernetes-version 1.34",
            "Note: the objects are for Kubernetes 1.34, the cluster's (the API server's /version (v1.34.4))\n",
            id="current-context-of-KUBECONFIG-1.34",
        ),
        pytest.param(
            V1_37,
            ("--kubeconfig", "{kubeconfig}"),
            False,
            V1,
            "--kubernetes-version 1.37",
            "Note: the objects are for Kubernetes 1.37, the cluster's (the API server's /version (v1.37.2))\n",
            id="kubeconfig-1.37",
        ),
        # the flag wins, and the cluster is not asked
        pytest.param(
            V1_34,
            ("--kubeconfig", "{kubeconfig}", "--kubernetes-version", "1.36"),
            False,
            V1,
            "--kubernetes-version 1.36",
            "",
            id="flag",
        ),
        # no kubeconfig at all: the newest known, as before
        pytest.param(V1_34, (), False, V1, "netqos-webhook manifests --as admission-policy", "", id="no-cluster"),
    ],
)
def test_admission_policies_are_made_in_the_api_of_the_clusters_version(
    reports: dict,
    flags: Sequence[str],
    environment: bool,
    api_version: str,
    header: str,
    note: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with kubeapi.serve(kubeapi.Snapshot(version=reports), tmp_path) as api:
        if environment:
            monkeypatch.setenv("KUBECONFIG", str(api.kubeconfig))
        argv = [flag.format(kubeconfig=api.kubeconfig) for flag in flags]
        code = cli.main(["manifests", "--as", "admission-policy", *argv])
        asked = api.requests
    out, err = capsys.readouterr()
    assert code == 0, err
    assert api_versions(out) == {api_version}
    assert out.splitlines()[0].endswith(header)  # the command line that makes the same objects again
    assert err.startswith(note)
    assert ("/version/" in asked) == bool(note), asked


def test_a_named_cluster_that_does_not_answer_is_one_line_and_exit_1(tmp_path: Path, capsys) -> None:
    config = kubeapi.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")  # the discard port: refused
    code = cli.main(["manifests", "--as", "admission-policy", "--kubeconfig", str(config)])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith("netqos-webhook manifests: cannot reach the Kubernetes API server at http://127.0.0.1:9 ")
    assert err.count("\n") == 1


def test_a_kubeconfig_of_the_environment_that_does_not_answer_leaves_the_newest_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """Nothing asked for that cluster: the objects are still made, and stderr says for which version and why."""
    monkeypatch.setenv("KUBECONFIG", str(kubeapi.write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9")))
    code = cli.main(["manifests", "--as", "admission-policy"])
    out, err = capsys.readouterr()
    assert code == 0
    assert api_versions(out) == {V1}
    assert err.startswith("Note: the objects are for Kubernetes 1.37, the newest known (--kubernetes-version to choose")


def test_the_help_says_the_default_without_a_cluster(capsys) -> None:
    with pytest.raises(SystemExit):
        cli.main(["manifests", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "with --as admission-policy, the cluster's own, its /version, with --kubeconfig/--context" in help_text
    assert "without one, the newest known, 1.37" in help_text
