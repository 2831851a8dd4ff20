"""Which API serves the MutatingAdmissionPolicy objects on a Kubernetes version: the objects
`admission_policy` makes, as that version's API server takes them.

Pure. MutatingAdmissionPolicy is GA (admissionregistration.k8s.io/v1, on by default) from
Kubernetes 1.36. On 1.34 and 1.35 it is beta: admissionregistration.k8s.io/v1beta1, whose
MutatingAdmissionPolicy and binding have the same fields as v1 (staging/src/k8s.io/api/
admissionregistration/v1beta1/types.go at v1.34.4 and v1.35.4: matchConstraints, matchConditions,
variables, mutations with patchType JSONPatch, failurePolicy, reinvocationPolicy), but off by
default: the API server needs `--feature-gates=MutatingAdmissionPolicy=true` (the gate is beta and
default false from 1.34: staging/src/k8s.io/apiserver/pkg/features/kube_features.go at v1.34.4)
and `--runtime-config=admissionregistration.k8s.io/v1beta1=true` (beta API groups are off by
default). Before 1.34 only the alpha API exists: there the webhook is the way. The warn-only
ValidatingAdmissionPolicy is v1 on every supported version (GA since 1.30).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.admission_policy import MUTATING_BINDING_KIND, MUTATING_KIND
from webhook.errors import UsageError
from webhook.kubeversion import KubeVersion
from webhook.names import ADMISSION_API_VERSION

V1 = ADMISSION_API_VERSION
V1BETA1 = "admissionregistration.k8s.io/v1beta1"
GA = KubeVersion(1, 36)
BETA = KubeVersion(1, 34)
FEATURE_GATE = "MutatingAdmissionPolicy"
RUNTIME_CONFIG = f"{V1BETA1.split('/')[0]}/v1beta1=true"
BETA_FLAGS = f"--feature-gates={FEATURE_GATE}=true --runtime-config={RUNTIME_CONFIG}"
MUTATING_KINDS = (MUTATING_KIND, MUTATING_BINDING_KIND)


class NoAdmissionPolicyApi(UsageError, ValueError):
    """The version serves no MutatingAdmissionPolicy API the generated objects can use."""


def mutating_api_version(version: KubeVersion) -> str:
    """The apiVersion of MutatingAdmissionPolicy and its binding on `version`."""
    if version >= GA:
        return V1
    if version >= BETA:
        return V1BETA1
    raise NoAdmissionPolicyApi(
        f"Kubernetes {version} has no MutatingAdmissionPolicy API the policies can use (v1beta1 from {BETA}, "
        f"v1 from {GA}): use the webhook there (netqos-webhook manifests, without --as admission-policy)"
    )


def beta_note(version: KubeVersion) -> str | None:
    """What the API server of `version` needs for the objects, when it is not the default."""
    if mutating_api_version(version) == V1:
        return None
    return (
        f"Kubernetes {version} serves {MUTATING_KIND} as {V1BETA1}, off by default: its API server needs {BETA_FLAGS}"
    )


def for_version(objects: Sequence[dict[str, Any]], version: KubeVersion) -> list[dict[str, Any]]:
    """The objects with the mutating kinds in the API `version` serves; the rest unchanged."""
    api = mutating_api_version(version)
    return [{**obj, "apiVersion": api} if obj.get("kind") in MUTATING_KINDS else obj for obj in objects]
