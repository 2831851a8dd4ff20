"""The pure parts of benchmarks/hpa.py (the run itself needs real nodes and minutes: not in CI)."""

import pytest

from benchmarks.hpa import _millicores, carries_preference
from webhook.names import INJECTED_ANNOTATION


@pytest.mark.parametrize(
    ("quantity", "millicores"),
    [("123456789n", 123), ("2600u", 3), ("250m", 250), ("1", 1000), ("0", 0), ("1.5", 1500)],
)
def test_a_metrics_api_cpu_quantity_reads_as_millicores(quantity, millicores):
    assert _millicores(quantity) == millicores


def _pod(annotated: bool, key: str) -> dict:
    term = {"weight": 90, "preference": {"matchExpressions": [{"key": key, "operator": "In", "values": ["high"]}]}}
    return {
        "metadata": {"annotations": {INJECTED_ANNOTATION: "x"} if annotated else {}},
        "spec": {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}},
    }


@pytest.mark.parametrize(
    ("pod", "carries"),
    [
        (_pod(True, "net"), True),
        (_pod(False, "net"), False),  # terms the user wrote, not the webhook's
        (_pod(True, "zone"), False),  # annotated, but no net term
        ({"metadata": {}, "spec": {}}, False),
    ],
)
def test_a_pod_carries_the_preference_only_with_the_annotation_and_a_net_term(pod, carries):
    assert carries_preference(pod) is carries
