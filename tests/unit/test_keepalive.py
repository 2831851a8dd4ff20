"""A kept-alive connection's budget: its age and requests, jittered within bounds (pure)."""

import random

import pytest

from webhook.serving.keepalive import Budget, ConnectionLimits, budget

DRAWS = 10_000


def test_the_defaults_are_a_minute_and_a_thousand_requests_within_a_fifth():
    assert ConnectionLimits() == ConnectionLimits(max_age=60.0, max_requests=1000, jitter=0.2)


@pytest.mark.parametrize(
    ("limits", "ages", "requests"),
    [
        (ConnectionLimits(60.0, 1000, 0.2), (48.0, 72.0), (800, 1200)),
        (ConnectionLimits(10.0, 50, 0.5), (5.0, 15.0), (25, 75)),
        (ConnectionLimits(1.0, 3, 1.0), (0.0, 2.0), (1, 6)),
    ],
)
def test_jittered_limits_stay_within_their_bounds_and_use_them(limits, ages, requests):
    rng = random.Random(20261207)
    drawn = [budget(limits, 100.0, rng) for _ in range(DRAWS)]
    age = [b.deadline - 100.0 for b in drawn]
    count = [b.requests for b in drawn]
    assert ages[0] <= min(age) and max(age) <= ages[1]
    assert requests[0] <= min(count) and max(count) <= requests[1]
    # spread over the range, not stuck at its middle: connections of a burst end apart
    span = ages[1] - ages[0]
    assert min(age) < ages[0] + span / 10 and max(age) > ages[1] - span / 10


def test_without_jitter_every_connection_gets_the_limits_exactly():
    rng = random.Random(1)
    assert {budget(ConnectionLimits(60.0, 1000, 0.0), 5.0, rng) for _ in range(100)} == {Budget(65.0, 1000)}


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (ConnectionLimits(0, 1000, 0.0), Budget(None, 1000)),
        (ConnectionLimits(60.0, 0, 0.0), Budget(60.0, None)),
        (ConnectionLimits(0, 0, 0.2), Budget(None, None)),
    ],
)
def test_a_limit_of_zero_is_no_limit(limits, expected):
    assert budget(limits, 0.0, random.Random(1)) == expected


def test_a_connection_answers_at_least_the_request_it_was_opened_for():
    assert {budget(ConnectionLimits(0, 1, 1.0), 0.0, random.Random(seed)).requests for seed in range(200)} == {1, 2}


@pytest.mark.parametrize(
    ("now", "served", "spent"),
    [
        (9.9, 4, False),  # young enough, requests left
        (10.0, 4, True),  # the age reached: this request is the last
        (5.0, 5, True),  # the fifth request is the last
        (5.0, 6, True),
    ],
)
def test_a_budget_is_spent_by_age_or_by_requests_whichever_comes_first(now, served, spent):
    assert Budget(deadline=10.0, requests=5).spent(now, served) is spent


def test_a_budget_without_limits_is_never_spent():
    assert not Budget(None, None).spent(1e12, 10**9)
