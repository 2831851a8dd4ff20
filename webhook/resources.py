"""Resource quantities and a pod's requests, as kube-scheduler counts them. Pure.

Amounts are integers in the scheduler's units: `cpu` in millicores (Quantity.MilliValue), every
other resource in whole units, bytes for memory and storage (Quantity.Value); both round up.

A pod's request follows k8s.io/component-helpers/resource `PodRequests` (Kubernetes v1.34): the
app containers and the restartable init containers (sidecars) add up; each ordinary init
container needs its own request plus the sidecars started before it; the pod needs the larger of
the two, per resource; pod-level `spec.resources.requests` (cpu, memory, hugepages) replace the
containers' sum; `spec.overhead` is added. With non-zero defaults (the scoring view,
pkg/scheduler/util `GetNonzeroRequests`), a container that does not name cpu or memory counts
100m and 200Mi. The API server copies limits into missing requests before the scheduler sees a
pod (defaults.go `SetDefaults_Container`); `container_requests` does it here too, so a manifest
that only sets limits is read as the cluster would store it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from webhook import apidata
from webhook.apidata import ShapeError

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
DEFAULT_MILLI_CPU_REQUEST = 100  # pkg/scheduler/util.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # pkg/scheduler/util.DefaultMemoryRequest
NON_ZERO_DEFAULTS: Mapping[str, int] = MappingProxyType(
    {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
)
POD_LEVEL_RESOURCES = (CPU, MEMORY)  # IsSupportedPodLevelResource, hugepages aside

_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:([eE][+-]?[0-9]+)|([a-zA-Z]*))")
# resource.Quantity's suffixes: SI below one, then powers of 1000 (k..E) and of 1024 (Ki..Ei).
_SUFFIX: Mapping[str, Fraction] = MappingProxyType(
    {"": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000)}
    | {s: Fraction(1000**i) for i, s in enumerate(("k", "M", "G", "T", "P", "E"), 1)}
    | {s: Fraction(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)}
)

Amounts = Mapping[str, int]


def parse_quantity(value: Any, path: str) -> Fraction:
    """A resource.Quantity ("250m", "1.5Gi", "1e3", 2) as an exact number; ShapeError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ShapeError(path, "a quantity such as 500m, 2 or 1Gi", value)
    text = str(value).strip() if not isinstance(value, str) else value
    match = _QUANTITY.fullmatch(text)
    if not match or (match.group(4) is not None and match.group(4) not in _SUFFIX):
        raise ShapeError(path, "a quantity such as 500m, 2 or 1Gi", value)
    sign, number, exponent, suffix = match.groups()
    amount = Fraction(number) * (Fraction(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""])
    return -amount if sign == "-" else amount


def amount(resource: str, quantity: Fraction) -> int:
    """The scheduler's integer for `quantity` of `resource`: millicores for cpu, else units (ceil)."""
    return math.ceil(quantity * 1000) if resource == CPU else math.ceil(quantity)


def resource_list(parent: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    """A ResourceList (`requests`, `limits`, `allocatable`, `overhead`) in scheduler units."""
    raw = apidata.obj(parent, key, path)
    return {name: amount(name, parse_quantity(q, f"{path}[{name!r}]")) for name, q in raw.items()}


@dataclass(frozen=True)
class Container:
    """What scheduling reads of one container."""

    requests: Amounts
    image: str = ""
    sidecar: bool = False  # an init container with restartPolicy Always
    host_ports: tuple[HostPort, ...] = ()


@dataclass(frozen=True)
class HostPort:
    """A container port bound on the node (`hostPort` > 0); ip "" means every address."""

    ip: str
    protocol: str
    port: int

    def conflicts(self, other: HostPort) -> bool:
        """HostPortInfo.CheckConflict: same protocol and port, and an overlapping address."""
        if (self.protocol, self.port) != (other.protocol, other.port):
            return False
        return self.ip in ("", "0.0.0.0") or other.ip in ("", "0.0.0.0") or self.ip == other.ip


def container_from_api(raw: Any, path: str, init: bool) -> Container:
    apidata.expect(raw, dict, path, "an object")
    resources = apidata.obj(raw, "resources", f"{path}.resources")
    requests = resource_list(resources, "requests", f"{path}.resources.requests")
    limits = resource_list(resources, "limits", f"{path}.resources.limits")
    requests = {**limits, **requests}  # SetDefaults_Container: a missing request defaults to its limit
    ports = []
    for i, port in enumerate(apidata.items(raw, "ports", f"{path}.ports")):
        where = f"{path}.ports[{i}]"
        apidata.expect(port, dict, where, "an object")
        host_port = apidata.integer(port, "hostPort", f"{where}.hostPort")
        if host_port > 0:
            protocol = apidata.text(port, "protocol", f"{where}.protocol") or "TCP"
            ports.append(HostPort(apidata.text(port, "hostIP", f"{where}.hostIP"), protocol, host_port))
    restart = apidata.text(raw, "restartPolicy", f"{path}.restartPolicy")
    return Container(requests, apidata.text(raw, "image", f"{path}.image"), init and restart == "Always", tuple(ports))


def pod_requests(
    containers: Iterable[Container],
    init_containers: Iterable[Container],
    overhead: Amounts = {},  # noqa: B006 - read only
    pod_level: Amounts = {},  # noqa: B006 - read only
    non_zero: Amounts = {},  # noqa: B006 - read only
) -> dict[str, int]:
    """component-helpers resource.PodRequests; `non_zero` fills resources a container leaves out."""
    total: dict[str, int] = {}
    for container in containers:
        _add(total, _with_defaults(container.requests, non_zero))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in init_containers:
        requests = _with_defaults(container.requests, non_zero)
        if container.sidecar:
            _add(total, requests)
            _add(sidecars, requests)
            needs: Mapping[str, int] = dict(sidecars)
        else:
            needs = dict(requests)
            _add(needs, sidecars)
        for name, value in needs.items():
            init_peak[name] = max(init_peak.get(name, 0), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, 0), value)
    for name, value in pod_level.items():
        if name in POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = value
    _add(total, overhead)
    return total


def _with_defaults(requests: Amounts, defaults: Amounts) -> Mapping[str, int]:
    if not defaults:
        return requests
    return {**defaults, **requests}


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def is_scalar(resource: str) -> bool:
    """v1helper.IsScalarResourceName: extended resources (`example.com/gpu`), hugepages,
    `kubernetes.io/`-prefixed native resources and attachable volumes."""
    if resource.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in resource:
        return True
    return "/" in resource and not resource.startswith("requests.")
