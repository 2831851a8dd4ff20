"""AdmissionReview bodies shaped like what kube-apiserver sends, for the benchmarks and the tests
that serve them (one review, every size of pod, the same bytes on both sides).

A typical review is a Deployment's pod at CREATE: `generateName` and no name, an owner reference
to its ReplicaSet, the service-account token volume and the default tolerations that the
built-in admission plugins add before mutating webhooks run, two containers with probes,
resources and env. It encodes to about 4 KB, like the reviews of the reference measurements
(docs/performance.md).

The uid is a placeholder that the load generator replaces per request (`PLACEHOLDER_UID`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

PLACEHOLDER_UID = "00000000-0000-4000-8000-000000000000"


def _container(name: str, image: str, port: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "env": [
            {"name": "LOG_LEVEL", "value": "info"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}},
        ],
        "resources": {
            "limits": {"cpu": "500m", "memory": "256Mi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": port, "scheme": "HTTP"},
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
            "timeoutSeconds": 1,
        },
        "volumeMounts": [
            {
                "name": "kube-api-access-x7k2p",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    }


def pod(containers: int = 2, labelled: bool = True) -> dict[str, Any]:
    """A pod as the API server hands it to a mutating webhook at CREATE."""
    labels = {"app": "checkout", "pod-template-hash": "7d9c6b5f48", "tier": "backend"}
    if labelled:
        labels["qos"] = "latency-sensitive"
    images = ["registry.example.com/shop/checkout:1.42.0", "registry.example.com/infra/envoy:1.31.2"]
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "checkout-7d9c6b5f48-",
            "namespace": "shop",
            "creationTimestamp": None,
            "labels": labels,
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9102"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "checkout-7d9c6b5f48",
                    "uid": "5b3f1c2e-8d44-4a8e-9d1c-3f0b6f7a2c11",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-x7k2p",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                _container(f"c{i}" if containers > 2 else ("app", "proxy")[i], images[i % 2], 8080 + i)
                for i in range(containers)
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {},
    }


def review(obj: dict[str, Any], uid: str = PLACEHOLDER_UID) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview of a pod CREATE by the ReplicaSet controller."""
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": obj["metadata"]["namespace"],
            "operation": "CREATE",
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
            },
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


# name -> (review document, whether the webhook must answer with a patch)
def scenarios() -> dict[str, tuple[dict[str, Any], bool]]:
    return {
        "typical": (review(pod()), True),
        "nonmatching": (review(pod(labelled=False)), False),
        "pod200": (review(pod(containers=200)), True),
    }


def encode(document: dict[str, Any]) -> bytes:
    """Compact JSON, as the API server's encoder writes it."""
    return json.dumps(document, separators=(",", ":")).encode()


def fresh(document: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(document)


if __name__ == "__main__":
    for name, (doc, patched) in scenarios().items():
        print(f"{name}: {len(encode(doc))} bytes, patch expected: {patched}")
