"""AdmissionReviews for a pod, and JSON patches applied two ways: by Python's `jsonpatch` and by Go's
JSON-patch through `kubectl patch --local` (the library the API server applies webhook patches with).

A test passes only when both implementations turn the pod into the same object.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import jsonpatch

KUBECTL_TIMEOUT_SECONDS = 60

JSONObject = dict[str, Any]
Patch = list[dict[str, Any]]


def pod_review(pod: JSONObject, uid: str = "uid-1", operation: str = "CREATE", **request: Any) -> JSONObject:
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


def decoded_patch(review: JSONObject) -> Patch:
    """The JSON patch an AdmissionReview response carries (base64), or [] when it has none."""
    encoded = review["response"].get("patch")
    return json.loads(base64.b64decode(encoded)) if encoded else []


def apply_python(obj: Any, ops: Patch) -> Any:
    return jsonpatch.apply_patch(obj, ops)


def apply_kubectl(obj: JSONObject, ops: Patch, tmp_path: Path) -> JSONObject:
    """Apply `ops` with Go's JSON-patch (`kubectl patch --local`); skips the calling test when
    kubectl is not installed."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        import pytest  # only here: scripts import this module without pytest installed

        pytest.skip("kubectl is not installed: cannot cross-check patches with Go's JSON-patch")
    pod_file = tmp_path / f"pod-{uuid.uuid4().hex}.json"
    pod_file.write_text(_kubectl_json(obj), encoding="utf-8")
    command = [kubectl, "patch", "--local", "-f", str(pod_file), "--type=json", "-p", _kubectl_json(ops)]
    done = subprocess.run(
        [*command, "-o", "json", "--show-managed-fields"],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_SECONDS,
    )
    assert done.returncode == 0, f"kubectl rejected the patch {ops}: {done.stderr}"
    result: JSONObject = json.loads(done.stdout)
    return result


_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\ufffe\uffff]")


def _kubectl_json(value: Any) -> str:
    """JSON that kubectl's YAML reader accepts for any string: raw UTF-8 (it rejects the surrogate
    escapes json.dumps writes beyond U+FFFF), and \\u escapes for what YAML may not hold raw.
    About kubectl's input only; the API server reads the webhook's patch with a JSON decoder."""
    return _NOT_YAML_PRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False))


def assert_patch_agrees(before: JSONObject, ops: Patch, expected: JSONObject, tmp_path: Path) -> None:
    """Both JSON-patch implementations turn `before` into `expected`."""
    assert apply_python(before, ops) == expected
    if ops:
        assert apply_kubectl(before, ops, tmp_path) == expected
