"""Helpers shared by the tests: fixtures, patch decoding, and applying patches two ways."""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).parent.parent

# The default rule's terms, written out by hand (not taken from the code under test).
NETQOS_TERMS = [
    {"weight": 90, "preference": {"matchExpressions": [{"key": "net", "operator": "In", "values": ["high"]}]}},
    {"weight": 10, "preference": {"matchExpressions": [{"key": "net", "operator": "NotIn", "values": ["low"]}]}},
]
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def expectations() -> dict[str, dict[str, Any]]:
    return yaml.safe_load((FIXTURES / "expectations.yaml").read_text())


def pod_review(pod: dict[str, Any], uid: str = "uid-1", operation: str = "CREATE", **request: Any) -> dict[str, Any]:
    """An AdmissionReview for `pod`, shaped like the API server's."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": operation,
            "namespace": "default",
            "object": pod,
            **request,
        },
    }


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    encoded = response["response"].get("patch")
    return json.loads(base64.b64decode(encoded)) if encoded else []


def with_netqos(pod: dict[str, Any], injected: str = "netqos") -> dict[str, Any]:
    """`pod` as the default rule should leave it: its own terms first, then the NetQoS terms."""
    out = copy.deepcopy(pod)
    out.setdefault("metadata", {}).setdefault("annotations", {})["netqos.io/injected"] = injected
    node_affinity = out.setdefault("spec", {}).setdefault("affinity", {}).setdefault("nodeAffinity", {})
    node_affinity[PREFERRED] = node_affinity.get(PREFERRED, []) + copy.deepcopy(NETQOS_TERMS)
    return out


def apply_python(obj: Any, ops: list[dict[str, Any]]) -> Any:
    return jsonpatch.apply_patch(obj, ops)


def apply_kubectl(obj: dict[str, Any], ops: list[dict[str, Any]], tmp_path: Path) -> dict[str, Any]:
    """Apply `ops` with Go's JSON-patch, the library the API server uses for webhook patches."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot cross-check patches with Go's JSON-patch")
    pod_file = tmp_path / f"pod-{uuid.uuid4().hex}.json"
    pod_file.write_text(_kubectl_json(obj), encoding="utf-8")
    done = subprocess.run(
        [
            kubectl,
            "patch",
            "--local",
            "-f",
            str(pod_file),
            "--type=json",
            "-p",
            _kubectl_json(ops),
            "-o",
            "json",
            "--show-managed-fields",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"kubectl rejected the patch {ops}: {done.stderr}"
    return json.loads(done.stdout)


_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\ufffe\uffff]")


def _kubectl_json(value: Any) -> str:
    """JSON that kubectl's YAML reader accepts for any string: raw UTF-8 (it rejects the surrogate
    escapes json.dumps writes beyond U+FFFF), and \\u escapes for what YAML may not hold raw.
    About kubectl's input only; the API server reads the webhook's patch with a JSON decoder."""
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def assert_patch_agrees(
    before: dict[str, Any], ops: list[dict[str, Any]], expected: dict[str, Any], tmp_path: Path
) -> None:
    """Both JSON-patch implementations turn `before` into `expected`."""
    assert apply_python(before, ops) == expected
    if ops:
        assert apply_kubectl(before, ops, tmp_path) == expected
