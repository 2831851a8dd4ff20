"""Resource quantities read as Go's resource.ParseQuantity reads them, in bounded time.

The answers are Go's own (k8s.io/apimachinery v0.36.3), recorded in
tests/fixtures/quantity/go-results.json by the Go program beside it (tests/tools re-runs it):
what parses, what is refused, and Value() / MilliValue(), the integers the scheduler counts.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.fixtures import FIXTURES
from webhook.apidata import ShapeError
from webhook.resources import INT64_MAX, amount, parse_quantity, resource_list

GO_RESULTS = json.loads((FIXTURES / "quantity" / "go-results.json").read_text())


@pytest.mark.parametrize("recorded", GO_RESULTS, ids=[repr(r["text"])[:40] for r in GO_RESULTS])
def test_every_quantity_reads_as_go_reads_it(recorded):
    text = recorded["text"]
    if "error" in recorded:
        with pytest.raises(ShapeError, match=r"must be a quantity"):
            parse_quantity(text, "x")
        return
    quantity = parse_quantity(text, "x")
    assert (quantity < 0) == recorded.get("negative", False)
    magnitude = abs(quantity)
    # Beyond an int64 Go's Value()/MilliValue() overflow; the scheduler's amount stays at the cap.
    assert amount("memory", magnitude) == (INT64_MAX if recorded.get("valueOverInt64") else recorded["value"])
    assert amount("cpu", magnitude) == (INT64_MAX if recorded.get("milliValueOverInt64") else recorded["milliValue"])


BOUNDED = [
    "1e3000000",
    "1e60000000",
    "1e-60000000",
    "1e2147483647",
    "1e-2147483648",  # int32(-exponent) wraps in Go: a huge value, not a tiny one
    "1e9223372036854775807",
    "9" * 100_000,
    "0." + "0" * 100_000 + "1",
    "1." + "1" * 100_000 + "Ei",
]


@pytest.mark.parametrize("text", BOUNDED, ids=[t[:24] for t in BOUNDED])
def test_any_exponent_or_length_parses_in_bounded_time(text):
    start = time.process_time()
    quantity = parse_quantity(text, "x")
    for resource in ("cpu", "memory"):
        assert 0 <= amount(resource, quantity) <= INT64_MAX
    assert time.process_time() - start < 0.5, text[:40]


def test_huge_quantities_stay_at_the_int64_cap_and_tiny_ones_round_up_to_one():
    assert amount("memory", parse_quantity("1e60000000", "x")) == INT64_MAX
    assert amount("cpu", parse_quantity("9Ei", "x")) == INT64_MAX
    assert amount("memory", parse_quantity("9Ei", "x")) == INT64_MAX  # ParseQuantity's own cap
    assert amount("cpu", parse_quantity("1e-60000000", "x")) == 1


@pytest.mark.parametrize(
    "field, text, problem",
    [
        ("cpu", "1e", "must be a quantity"),
        ("memory", "1Qi", "must be a quantity"),
        ("cpu", "-1", "must be greater than or equal to 0"),
        ("memory", "-1Ki", "must be greater than or equal to 0"),
    ],
)
def test_a_refused_quantity_names_its_field_and_value(field, text, problem):
    with pytest.raises(ShapeError) as err:
        resource_list({"requests": {field: text}}, "requests", "spec.containers[0].resources.requests")
    message = str(err.value)
    assert message.startswith(f"spec.containers[0].resources.requests['{field}']") and problem in message
    assert f'"{text}"' in message
