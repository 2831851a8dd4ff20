"""The pure parts of benchmarks/hpa.py (the run itself needs real nodes and minutes: not in CI)."""

import pytest

from benchmarks.hpa import (
    PodReading,
    Sample,
    _millicores,
    carries_preference,
    counter,
    cpu_per_review,
    intervals,
    scaling,
    shares,
)
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


EXPOSITION = """# HELP netqos_admission_requests_total AdmissionReviews answered.
# TYPE netqos_admission_requests_total counter
netqos_admission_requests_total{decision="injected",dry_run="true",operation="CREATE"} 120.0
netqos_admission_requests_total{decision="skipped",dry_run="false",operation="CREATE"} 3.0
netqos_admission_requests_totalx 1000.0
netqos_admission_duration_seconds_count 5000.0
"""


@pytest.mark.parametrize(
    ("name", "total"),
    [
        ("netqos_admission_requests_total", 123.0),  # every label set, not a metric whose name it starts
        ("netqos_admission_duration_seconds_count", 5000.0),
        ("netqos_absent_total", 0.0),
    ],
)
def test_a_counter_is_the_sum_of_its_own_samples(name, total):
    assert counter(EXPOSITION, name) == total


def _sample(t: float, pods: dict, phase: str = "load", desired: int = 2, ready: int | None = None, cpu=()) -> Sample:
    """A sample at `t` s; `pods`: name -> (Ready at, reviews counted), None for not Ready."""
    readings = [
        PodReading(name, "node", 0.0 if ready_at is None else ready_at - 10, ready_at, reviews)
        for name, (ready_at, reviews) in pods.items()
    ]
    return Sample(
        seconds=t, phase=phase, hpa_current=desired, hpa_desired=desired, cpu_percent=None,
        ready=len(pods) if ready is None else ready, pod_millicores=list(cpu), creates_per_second=0,
        pods_created=0, fail_open=0, load_average=0, pods=readings,
    )  # fmt: skip


def _run(new: list[float | None]) -> list[Sample]:
    """Two replicas Ready before the load (at 0 s, each having answered 5 reviews), 60 reviews per
    10 s shared among the answering replicas; a third replica Ready at 30 s that answers `new[i]`
    of them in each 10 s after it (None: not yet Ready)."""
    samples, counts = [], {"a": 5.0, "b": 5.0, "c": 0.0}
    samples.append(_sample(0, {"a": (-100, 5.0), "b": (-100, 5.0)}, phase="idle"))
    for i, t in enumerate(range(10, 10 * (len(new) + 1), 10)):
        mine = new[i]
        rest = 60 - (mine or 0)
        counts["a"] += rest / 2
        counts["b"] += rest / 2
        pods = {"a": (-100, counts["a"]), "b": (-100, counts["b"])}
        if mine is not None:
            counts["c"] += mine
            pods["c"] = (30, counts["c"])
        samples.append(_sample(t, pods))
    return samples


@pytest.mark.parametrize(
    ("after_ready", "first_review", "fair_share", "within_a_minute"),
    [
        # connections recycled: the new replica answers a third of the reviews from its first interval
        ([20, 20, 20, 20, 20], 10, 10, True),
        # kept-alive connections never recycled: Ready, and idle
        ([0, 0, 0, 0, 0], None, None, False),
        # a first connection after 20 s (below half of 1/3), its share after 40 s
        ([0, 0, 5, 5, 15, 20, 20], 30, 50, True),
        # its share only after 70 s
        ([0, 0, 0, 0, 0, 0, 5, 20], 70, 80, False),
    ],
)
def test_a_new_replica_is_timed_from_ready_to_its_first_review_and_to_half_its_fair_share(
    after_ready, first_review, fair_share, within_a_minute
):
    run = _run([None, None, None, *after_ready])  # Ready at 30 s, counted from the sample at 40 s
    load_end = run[-1].seconds
    new = {r.name: r for r in shares(run, load_end)}["c"]
    assert (new.new, new.first_review_after, new.fair_share_after) == (True, first_review, fair_share)
    assert new.took_share_within_a_minute is within_a_minute
    assert new.reviews == sum(after_ready)
    assert new.per_minute == pytest.approx(sum(after_ready) / ((load_end - 30) / 60))


def test_the_replicas_ready_before_the_load_are_counted_from_its_start_not_from_zero():
    run = _run([None, None, None, 20, 20])
    before = {r.name: r for r in shares(run, run[-1].seconds)}["a"]
    # 3 x 30 + 2 x 20 answered during the load; the 5 answered before it are not the load's
    assert (before.new, before.reviews, before.minutes) == (False, 130, 50 / 60)
    assert before.first_review_after is None


def test_a_restarted_replica_counts_from_zero_again():
    run = [
        _sample(0, {"a": (-100, 100.0)}, phase="idle"),
        _sample(10, {"a": (-100, 160.0)}),
        _sample(20, {"a": (-100, 30.0)}),  # restarted: its counter starts over
    ]
    assert [span.reviews for span in intervals(run, 20)] == [{"a": 60.0}, {"a": 30.0}]


def test_the_samples_after_the_load_are_not_part_of_the_share():
    run = [*_run([None, None, None, 20]), _sample(50, {"a": (-100, 500.0), "b": (-100, 500.0)}, phase="cooldown")]
    assert [span.end for span in intervals(run, 45)] == [10, 20, 30, 40]


@pytest.mark.parametrize(
    ("desired", "ready", "pods", "at_min", "back"),
    [
        # the HPA asks for 2 at 400 s, the third replica gone at 420 s
        ([2, 3, 3, 3, 2, 2], [2, 3, 3, 3, 3, 2], [2, 3, 3, 3, 3, 2], 400, 420),
        # back at 2 ready, but the terminating pod still listed
        ([2, 3, 3, 3, 2, 2], [2, 3, 3, 3, 2, 2], [2, 3, 3, 3, 3, 3], 400, None),
        # the stabilisation window not over within the cooldown
        ([2, 3, 3, 3, 3, 3], [2, 3, 3, 3, 3, 3], [2, 3, 3, 3, 3, 3], None, None),
    ],
)
def test_the_scale_down_is_timed_from_the_load_stopping_to_the_hpa_and_the_pods_at_the_minimum(
    desired, ready, pods, at_min, back
):
    times = [0, 30, 60, 300, 400, 420]
    run = [
        _sample(t, {f"p{i}": (0, 0.0) for i in range(n)}, desired=d, ready=r, phase="load" if t <= 60 else "cooldown")
        for t, d, r, n in zip(times, desired, ready, pods, strict=True)
    ]
    scaled = scaling(run, load_end=60, min_replicas=2)
    assert scaled.decisions[:2] == [(0, 2), (30, 3)]
    assert (scaled.at_min, scaled.back_to_min) == (at_min, back)


def test_cpu_per_review_is_the_pods_cpu_over_the_reviews_they_counted_after_the_first_minute():
    run = [
        _sample(0, {"a": (-100, 0.0)}, phase="idle"),
        _sample(60, {"a": (-100, 600.0)}, cpu=[900]),  # still settling: not counted
        _sample(70, {"a": (-100, 800.0)}, cpu=[40]),  # 20 reviews/s at 40m: 2 ms each
        _sample(80, {"a": (-100, 1000.0)}, cpu=[40]),
    ]
    assert cpu_per_review(run, 80, settle=65) == pytest.approx(2.0)
