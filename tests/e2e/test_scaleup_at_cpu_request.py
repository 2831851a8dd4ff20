"""A Deployment of latency-sensitive pods scaled up through the real API server while the webhook's
processes get only the CPU that deploy/base requests for its container: what a replica is sure to
get when its node is busy. Every pod must carry the preference, and the API server must have failed
open for none (`apiserver_admission_webhook_fail_open_count`).

Why this can fail: in a burst the ReplicaSet controller creates up to 245 pods at once, and the API
server calls the webhook over HTTP/1.1 (a Service is never called over HTTP/2), so most calls open a
new TLS connection (it keeps 25 idle ones per host). That costs the server about 1 ms of CPU per
handshake on top of the review; with too little CPU the calls pass the registration's 5 s
`timeoutSeconds` ("context deadline exceeded" in the API server's log) and those pods are created
without the preference. With the 50m the Deployment used to request, 71 of 1,000 pods were lost
this way (docs/performance.md, "Admission at scale").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from benchmarks import scaleup
from harness import cpuquota
from harness.controlplane import Cluster
from tests.fixtures import REPO
from webhook.resources import parse_quantity

# Two syncs of the ReplicaSet controller: each creates at most 500 pods (BurstReplicas) in batches
# that double from 1, the last 245 at once (kubernetes v1.36.3 pkg/controller/replicaset/
# replica_set.go, slowStartBatch): the API server calls the webhook 245 times at once.
REPLICAS = 1000


def requested_cpus() -> float:
    """The CPU request of the webhook's container in deploy/base, in CPUs."""
    deployment = yaml.safe_load((REPO / "deploy/base/deployment.yaml").read_text())
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "webhook"]
    return float(parse_quantity(container["resources"]["requests"]["cpu"], "resources.requests.cpu"))


@pytest.fixture
def scaling(cluster: Cluster, unregistered: None) -> Iterator[None]:
    """No other registration while the scale-up installs its own; its namespace removed after."""
    yield
    scaleup.remove_namespace(cluster, "webhook")


def test_a_scale_up_with_the_webhook_at_its_cpu_request_fails_open_for_no_pod(
    cluster: Cluster, scaling: None, tmp_path: Path
) -> None:
    if why := cpuquota.available():
        pytest.skip(f"cannot confine the webhook to a CPU quota: {why}")
    cpus = requested_cpus()
    result = scaleup.scale_up(cluster, "webhook", REPLICAS, tmp_path, cpus=cpus)
    assert result.created == REPLICAS, result
    assert (result.fail_open, result.rejected) == (0, 0), result
    assert result.with_preference == result.status_selected == REPLICAS, result
    assert result.status_missing == 0, result
