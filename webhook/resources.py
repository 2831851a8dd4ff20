"""Resource quantities and a pod's requests, as kube-scheduler counts them. Pure.

Amounts are integers in the scheduler's units: `cpu` in millicores (Quantity.MilliValue), every
other resource in whole units, bytes for memory and storage (Quantity.Value); both round up.
Quantities are read as k8s.io/apimachinery's resource.ParseQuantity reads them (v0.36.3,
pkg/api/resource/quantity.go: its grammar, its quirks and its cap), exactly and in time linear
in the text, whatever the exponent; tests/fixtures/quantity holds Go's own answers.

A pod's requests follow kube-scheduler v1.36.3: `pod_resources` reads a Pod object as
pkg/scheduler/framework/types.go `PodInfo.CalculateResource` does (k8s.io/kubernetes v1.36.3),
with k8s.io/component-helpers v0.36.3 resource/helpers.go `PodRequests`: the app containers and
the restartable init containers (sidecars) add up; each ordinary init container needs its own
request plus the sidecars started before it; the pod needs the larger of the two, per resource;
pod-level `spec.resources.requests` (cpu, memory, hugepages-*) replace the containers' sum;
`spec.overhead` is added. In-place resize (InPlacePodVerticalScaling, GA, and its pod-level form,
beta and on in 1.36): a container with a status counts the larger of its spec, its
`status.resources.requests` (actuated) and its `allocatedResources`, or only the last two while
the resize is Infeasible (`determineEffectiveRequests`); the pod level likewise with
`status.resources` and `status.allocatedResources`. The sums are exact quantities, rounded once
per pod (`Resource.Add` takes MilliValue or Value of the pod's total), never per container. The
scoring view (`NonZeroRequested`) gives a container without cpu or memory 100m / 200Mi, or, with
pod-level requests, only for a resource set at neither level (`getNonMissingContainerRequests`).

What the API server's defaulting does before the scheduler sees a pod is done here too
(pkg/apis/core/v1/defaults.go v1.36.3 `SetDefaults_Pod`), so a manifest is read as the cluster
would store it: a container's missing request defaults to its limit; pod-level requests default
from the containers' requests (cpu, memory) and then from pod-level limits, after hugepages
limits default from the containers' (`defaultPodRequests`, `defaultHugePagePodLimits`); with
`hostNetwork`, every container port without a hostPort binds its containerPort on the node
(`defaultHostNetworkPorts`), which NodePorts then counts (pkg/scheduler/util `GetHostPorts`:
app containers and sidecars).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, Context, Decimal
from types import MappingProxyType
from typing import Any

from webhook import apidata
from webhook.apidata import InvalidValue, ShapeError
from webhook.validation import parse_int64

CPU, MEMORY, EPHEMERAL_STORAGE, PODS = "cpu", "memory", "ephemeral-storage", "pods"
DEFAULT_MILLI_CPU_REQUEST = 100  # pkg/scheduler/util.DefaultMilliCPURequest
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024  # pkg/scheduler/util.DefaultMemoryRequest
NON_ZERO_DEFAULTS: Mapping[str, int] = MappingProxyType(
    {CPU: DEFAULT_MILLI_CPU_REQUEST, MEMORY: DEFAULT_MEMORY_REQUEST}
)
RESIZE_PENDING = "PodResizePending"  # the pod condition of a resize not yet actuated (v1.PodResizePending)
POD_LEVEL_RESOURCES = (CPU, MEMORY)  # IsSupportedPodLevelResource, hugepages aside

# resource.Quantity's suffixes (suffix.go): SI below one and powers of 1000 (k..E) are base 10,
# Ki..Ei powers of 1024; anything else that starts with e or E is a decimal exponent.
_DECIMAL_SUFFIX: Mapping[str, int] = MappingProxyType(
    {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
)
_BINARY_SUFFIX: Mapping[str, int] = MappingProxyType({"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60})
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
INT64_MAX = 2**63 - 1  # resource.maxAllowed: ParseQuantity's cap for binary quantities
# Exact decimal arithmetic whatever the exponent: "1e60000000" is a coefficient and an exponent,
# never sixty million digits, so parsing and comparing take microseconds.
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
_QUANTITY_EXAMPLE = "a quantity such as 500m, 2 or 1Gi"

Amounts = Mapping[str, int]


def parse_quantity(value: Any, path: str) -> Decimal:
    """The value of a resource.Quantity ("250m", "1.5Gi", "1e3", 2) as Go's ParseQuantity reads it,
    exactly; ShapeError where Go returns an error. Time is linear in the text's length, whatever
    its exponent."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ShapeError(path, _QUANTITY_EXAMPLE, value)
    text = value if isinstance(value, str) else str(value)  # a YAML/JSON number: its digits
    parsed = _go_parse_quantity(text)
    if parsed is None:
        raise InvalidValue(path, _QUANTITY_EXAMPLE, value)
    return parsed


def _split(text: str) -> tuple[bool, str, str, str, str] | None:
    """parseQuantityString (quantity.go): (positive, value, num, denom, suffix), or None for
    ErrFormatWrong. Go's quirks are kept: "1.G", ".5", "5." and even "." or "-" parse."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while pos < end and text[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        return None
    return positive, value, num, denom, text[suffix_start:]


def _int32(n: int) -> int:
    """Go's int32(n): the low 32 bits, signed."""
    return (n + 2**31) % 2**32 - 2**31


def _go_parse_quantity(text: str) -> Decimal | None:
    """ParseQuantity (quantity.go) without building the canonical form: the value, or None."""
    if not text:
        return None
    split = _split(text)
    if split is None:
        return None
    positive, value, num, denom, suffix = split
    if suffix in _DECIMAL_SUFFIX:
        base, exponent = 10, _DECIMAL_SUFFIX[suffix]
    elif suffix in _BINARY_SUFFIX:
        base, exponent = 2, _BINARY_SUFFIX[suffix]
    elif len(suffix) > 1 and suffix[0] in "eE":
        parsed = parse_int64(suffix[1:])
        if parsed is None:
            return None
        # interpret() returns int32(parsed): Go keeps the low 32 bits of a larger exponent
        base, exponent = 10, _int32(parsed)
    else:
        return None
    digits = num + denom
    # The slow path (inf.Dec's SetString of the text before the suffix) needs a digit; the fast
    # path reads "." or "+." as 0. So ".Ki" and ".e-9" are 0 but ".Pi" and ".e-10" are refused.
    has_digit = any(c in _DIGITS for c in value)
    if base == 10:
        # Fast path (scale >= -9, at most 18 digits): digits x 10^int32(exponent - len(denom)).
        # Otherwise the inf.Dec path: scale int32(len(denom) + int32(-exponent)); the two agree
        # unless the exponent sits at int32's edges, where Go's wrap-around decides.
        scale = _int32(exponent - len(denom))
        if not (18 - len(digits) >= 0 and scale >= -9):
            if not has_digit:
                return None
            scale = -_int32(len(denom) + _int32(-exponent))
        amount = Decimal(f"{digits}E{scale}")
    else:
        # Fast path: no fraction and few enough digits for the power of two (quantity.go's
        # precision, 15 - len(num) - int(exponent*3/10) - 1 >= 0); else inf.Dec's.
        fast = not denom and 15 - len(num) - exponent * 3 // 10 - 1 >= 0
        if not (fast or has_digit):
            return None
        amount = _EXACT.multiply(Decimal(f"{num}.{denom or '0'}"), Decimal(2**exponent))
        amount = min(amount, Decimal(INT64_MAX))  # the cap: binary quantities only, as in Go
    return amount if positive else -amount


def amount(resource: str, quantity: Decimal) -> int:
    """The scheduler's integer for a non-negative `quantity` of `resource`: MilliValue for cpu,
    Value for the others (both round up). Where Go's int64 would overflow (a quantity beyond
    9.2e18 units, or 9.2e15 cpus), the amount stays at the int64 maximum: nothing fits it and
    a node that large is never full."""
    scaled = _EXACT.scaleb(quantity, 3) if resource == CPU else quantity
    if scaled >= INT64_MAX:
        return INT64_MAX
    return int(scaled.to_integral_value(rounding=ROUND_CEILING, context=_EXACT))


def quantity_list(parent: Mapping[str, Any], key: str, path: str) -> dict[str, Decimal]:
    """A ResourceList (`requests`, `limits`, `allocatable`, `overhead`) as exact quantities.
    Negative quantities are refused, as the API server refuses them in each of these fields."""
    raw = apidata.obj(parent, key, path)
    quantities = {}
    for name, text in raw.items():
        where = f"{path}[{name!r}]"
        quantity = parse_quantity(text, where)
        if quantity < 0:
            raise InvalidValue(where, "greater than or equal to 0 (the API server rejects negative quantities)", text)
        quantities[name] = quantity
    return quantities


def resource_list(parent: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    """A ResourceList in scheduler units (see `quantity_list`)."""
    return amounts(quantity_list(parent, key, path))


def amounts(quantities: Mapping[str, Decimal]) -> dict[str, int]:
    """Exact quantities in scheduler units, each rounded once (Resource.Add)."""
    return {name: amount(name, quantity) for name, quantity in quantities.items()}


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


@dataclass(frozen=True)
class PodResources:
    """What kube-scheduler counts of one pod, in scheduler units.

    `requests`: NodeResourcesFit's Filter and NodeInfo.Requested. `non_zero_requests`: NodeInfo's
    NonZeroRequested (cpu and memory with the defaults of `getNonMissingContainerRequests`).
    `scored_requests`: what the resource scorers take of the pod being scheduled (resource_allocation.go
    `calculatePodResourceRequest`: 100m / 200Mi for every container that names no cpu / memory).
    `host_ports`: what NodePorts counts (app containers and sidecars)."""

    requests: Mapping[str, int] = field(default_factory=dict)
    non_zero_requests: Mapping[str, int] = field(default_factory=dict)
    scored_requests: Mapping[str, int] = field(default_factory=dict)
    host_ports: tuple[HostPort, ...] = ()


@dataclass(frozen=True)
class _Container:
    name: str
    requests: Mapping[str, Decimal]  # after the API server's defaulting from limits
    limits: Mapping[str, Decimal]
    init: bool
    sidecar: bool  # an init container with restartPolicy Always
    host_ports: tuple[HostPort, ...]


@dataclass(frozen=True)
class _Status:
    """The resize state of a pod: each container's (actuated requests, allocated) where its status
    has `resources`, the pod level's, and whether the resize is Infeasible."""

    containers: Mapping[str, tuple[Mapping[str, Decimal], Mapping[str, Decimal]]]
    pod: tuple[Mapping[str, Decimal], Mapping[str, Decimal]] | None
    infeasible: bool


def pod_resources(pod: Mapping[str, Any]) -> PodResources:
    """A Pod object (API JSON data: spec and status) as kube-scheduler v1.36 counts its resources;
    ShapeError names a bad field. See the module's doc for the Go code it follows."""
    spec = apidata.obj(pod, "spec", "spec")
    host_network = spec.get("hostNetwork")
    if host_network is not None:
        apidata.expect(host_network, bool, "spec.hostNetwork", "a boolean")
    containers = tuple(
        _container(c, f"spec.containers[{i}]", False, bool(host_network))
        for i, c in enumerate(apidata.items(spec, "containers", "spec.containers"))
    ) + tuple(
        _container(c, f"spec.initContainers[{i}]", True, bool(host_network))
        for i, c in enumerate(apidata.items(spec, "initContainers", "spec.initContainers"))
    )
    pod_level = _pod_level_requests(apidata.obj(spec, "resources", "spec.resources"), containers)
    status = _status(apidata.obj(pod, "status", "status"))
    overhead = quantity_list(spec, "overhead", "spec.overhead")
    requests = _pod_requests(containers, pod_level, status, overhead, {})
    level_set = any(_pod_level_resource(name) for name in pod_level)
    non_missing = {name: value for name, value in _NON_ZERO.items() if not level_set or name not in requests}
    non_zero = _pod_requests(containers, pod_level, status, overhead, non_missing) if non_missing else requests
    scored = _pod_requests(containers, pod_level, status, overhead, _NON_ZERO)
    counted = amounts(requests)
    return PodResources(
        counted,
        {**counted, **{name: amount(name, non_zero.get(name, Decimal(0))) for name in (CPU, MEMORY)}},
        {**counted, **{name: amount(name, scored.get(name, Decimal(0))) for name in (CPU, MEMORY)}},
        tuple(p for c in containers if c.sidecar or not c.init for p in c.host_ports),
    )


_NON_ZERO: Mapping[str, Decimal] = MappingProxyType(
    {CPU: Decimal(DEFAULT_MILLI_CPU_REQUEST).scaleb(-3), MEMORY: Decimal(DEFAULT_MEMORY_REQUEST)}
)


def _container(raw: Any, path: str, init: bool, host_network: bool) -> _Container:
    apidata.expect(raw, dict, path, "an object")
    resources = apidata.obj(raw, "resources", f"{path}.resources")
    requests = quantity_list(resources, "requests", f"{path}.resources.requests")
    limits = quantity_list(resources, "limits", f"{path}.resources.limits")
    ports = []
    for i, port in enumerate(apidata.items(raw, "ports", f"{path}.ports")):
        where = f"{path}.ports[{i}]"
        apidata.expect(port, dict, where, "an object")
        host_port = apidata.integer(port, "hostPort", f"{where}.hostPort")
        if host_port == 0 and host_network:  # defaultHostNetworkPorts
            host_port = apidata.integer(port, "containerPort", f"{where}.containerPort")
        if host_port > 0:
            protocol = apidata.text(port, "protocol", f"{where}.protocol") or "TCP"
            ports.append(HostPort(apidata.text(port, "hostIP", f"{where}.hostIP"), protocol, host_port))
    sidecar = init and apidata.text(raw, "restartPolicy", f"{path}.restartPolicy") == "Always"
    return _Container(
        apidata.text(raw, "name", f"{path}.name"),
        {**limits, **requests},  # SetDefaults_Pod: a missing request defaults to its limit
        limits,
        init,
        sidecar,
        tuple(ports),
    )


def _pod_level_resource(name: str) -> bool:
    """IsSupportedPodLevelResource: cpu, memory and hugepages."""
    return name in POD_LEVEL_RESOURCES or name.startswith("hugepages-")


def _pod_level_requests(raw: Mapping[str, Any], containers: tuple[_Container, ...]) -> dict[str, Decimal]:
    """spec.resources.requests as the API server defaults them (defaultHugePagePodLimits, then
    defaultPodRequests): only when pod-level resources are given at all."""
    requests = quantity_list(raw, "requests", "spec.resources.requests")
    limits = quantity_list(raw, "limits", "spec.resources.limits")
    if requests or limits:
        container_limits = _aggregate([(c, c.limits) for c in containers])
        for name, value in container_limits.items():
            if name.startswith("hugepages-") and name not in requests and name not in limits:
                limits[name] = value
    if limits:
        for name, value in _aggregate([(c, c.requests) for c in containers]).items():
            if name in POD_LEVEL_RESOURCES and name not in requests:  # overcommittable: cpu, memory
                requests[name] = value
        for name, value in limits.items():
            if _pod_level_resource(name) and name not in requests:
                requests[name] = value
    return requests


def _status(status: Mapping[str, Any]) -> _Status:
    containers = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for i, raw in enumerate(apidata.items(status, key, f"status.{key}")):
            path = f"status.{key}[{i}]"
            apidata.expect(raw, dict, path, "an object")
            if raw.get("resources") is not None:  # cs.Resources != nil
                actuated = apidata.obj(raw, "resources", f"{path}.resources")
                containers[apidata.text(raw, "name", f"{path}.name")] = (
                    quantity_list(actuated, "requests", f"{path}.resources.requests"),
                    quantity_list(raw, "allocatedResources", f"{path}.allocatedResources"),
                )
    pod = None
    if status.get("resources") is not None:
        actuated = apidata.obj(status, "resources", "status.resources")
        pod = (
            quantity_list(actuated, "requests", "status.resources.requests"),
            quantity_list(status, "allocatedResources", "status.allocatedResources"),
        )
    infeasible = False
    for i, condition in enumerate(apidata.items(status, "conditions", "status.conditions")):
        apidata.expect(condition, dict, f"status.conditions[{i}]", "an object")
        if condition.get("type") == RESIZE_PENDING:  # IsPodResizeInfeasible: the first one decides
            infeasible = condition.get("reason") == "Infeasible"
            break
    return _Status(containers, pod, infeasible)


def _effective(
    spec: Mapping[str, Decimal], actuated: Mapping[str, Decimal], allocated: Mapping[str, Decimal], infeasible: bool
) -> dict[str, Decimal]:
    """determineEffectiveRequests: the larger of spec, actuated and allocated, per resource; while
    the resize is Infeasible, of actuated and allocated only."""
    effective: dict[str, Decimal] = {}
    for source in (actuated, allocated) if infeasible else (spec, actuated, allocated):
        for name, value in source.items():
            effective[name] = max(effective.get(name, value), value)
    return effective


def _pod_requests(
    containers: tuple[_Container, ...],
    pod_level: Mapping[str, Decimal],
    status: _Status,
    overhead: Mapping[str, Decimal],
    non_missing: Mapping[str, Decimal],
) -> dict[str, Decimal]:
    """PodRequests with UseStatusResources (and its pod-level form) and NonMissingContainerRequests."""
    each = []
    for c in containers:
        requests: Mapping[str, Decimal] = c.requests
        resized = status.containers.get(c.name)
        if resized is not None and (c.sidecar or not c.init):  # ordinary init containers: their spec
            requests = _effective(c.requests, *resized, status.infeasible)
        each.append((c, {**non_missing, **requests}))
    total = _aggregate(each)
    if any(_pod_level_resource(name) for name in pod_level):
        effective = None if status.pod is None else _effective(pod_level, *status.pod, status.infeasible)
        for name, value in pod_level.items():
            if _pod_level_resource(name):
                total[name] = value if effective is None else effective.get(name, Decimal(0))
    _add(total, overhead)
    return total


def _aggregate(containers: Iterable[tuple[_Container, Mapping[str, Decimal]]]) -> dict[str, Decimal]:
    """AggregateContainerRequests (or Limits) over (container, its list): the app containers and
    the sidecars add up; each ordinary init container needs its own plus the sidecars started
    before it; the pod needs the larger, per resource."""
    total: dict[str, Decimal] = {}
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for container, values in containers:
        if not container.init:
            _add(total, values)
            continue
        if container.sidecar:
            _add(total, values)
            _add(sidecars, values)
            needs: Mapping[str, Decimal] = sidecars
        else:
            needs = dict(values)
            _add(needs, sidecars)
        for name, value in needs.items():
            init_peak[name] = max(init_peak.get(name, value), value)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, value), value)
    return total


def _add(into: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, value in more.items():
        into[name] = _EXACT.add(into.get(name, Decimal(0)), value)  # exact whatever the exponent


def is_scalar(resource: str) -> bool:
    """v1helper.IsScalarResourceName: extended resources (`example.com/gpu`), hugepages,
    `kubernetes.io/`-prefixed native resources and attachable volumes."""
    if resource.startswith(("hugepages-", "attachable-volumes-")) or "kubernetes.io/" in resource:
        return True
    return "/" in resource and not resource.startswith("requests.")
