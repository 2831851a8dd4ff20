"""Resource quantities and a pod's requests, as kube-scheduler counts them. Pure.

Amounts are integers in the scheduler's units: `cpu` in millicores (Quantity.MilliValue), every
other resource in whole units, bytes for memory and storage (Quantity.Value); both round up.
Quantities are read as k8s.io/apimachinery's resource.ParseQuantity reads them (v0.36.3,
pkg/api/resource/quantity.go: its grammar, its quirks and its cap), exactly and in time linear
in the text, whatever the exponent; tests/fixtures/quantity holds Go's own answers.

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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


def resource_list(parent: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    """A ResourceList (`requests`, `limits`, `allocatable`, `overhead`) in scheduler units.
    Negative quantities are refused, as the API server refuses them in each of these fields."""
    raw = apidata.obj(parent, key, path)
    amounts = {}
    for name, text in raw.items():
        where = f"{path}[{name!r}]"
        quantity = parse_quantity(text, where)
        if quantity < 0:
            raise InvalidValue(where, "greater than or equal to 0 (the API server rejects negative quantities)", text)
        amounts[name] = amount(name, quantity)
    return amounts


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
