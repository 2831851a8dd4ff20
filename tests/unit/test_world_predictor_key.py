"""`World.predictor` reads a pod's whole spec for its key once per pod object and profile, then
knows it again: a plan asks for the predictor of one replacement view per candidate. Pods of one
key share a predictor whichever object asks; a pod of another spec never gets theirs."""

from __future__ import annotations

import dataclasses

import pytest

from harness.pods import pod
from webhook.scheduler import keys
from webhook.scheduler.incremental import World
from webhook.scheduler.model import Node, UsageTally
from webhook.scheduler.plugins.netqos import NETQOS_TARGET
from webhook.scheduler.read import pod_info
from webhook.scheduler.registry import DEFAULT_PROFILE

NODES = [Node(f"n{i}", {"net": "high" if i % 2 else "low"}, allocatable={"cpu": 4000, "pods": 110}) for i in range(4)]


def requesting(cpu: str):
    return pod_info(pod(containers=[{"name": "app", "image": "app:1", "resources": {"requests": {"cpu": cpu}}}]))


@pytest.fixture
def counted(monkeypatch) -> list[object]:
    asked: list[object] = []
    real = keys.scheduling_key

    def counting(p, *args, **kwargs):
        asked.append(p)
        return real(p, *args, **kwargs)

    monkeypatch.setattr(keys, "scheduling_key", counting)
    return asked


def world() -> World:
    return World(NODES, {n.name: UsageTally() for n in NODES}, DEFAULT_PROFILE, NETQOS_TARGET)


def test_the_same_pod_object_is_keyed_once(counted):
    w, view = world(), requesting("500m")
    first = w.predictor(view)
    assert all(w.predictor(view) is first for _ in range(5))
    assert counted == [view]


def test_an_equal_pod_of_another_object_is_keyed_and_shares_the_predictor(counted):
    w, view = world(), requesting("500m")
    twin = dataclasses.replace(view)
    assert w.predictor(twin) is w.predictor(view)
    assert counted == [twin, view]


def test_a_pod_of_another_spec_gets_its_own_predictor(counted):
    w = world()
    assert w.predictor(requesting("500m")) is not w.predictor(requesting("3"))


def test_another_schedulers_profile_is_keyed_again_for_the_same_pod(counted):
    w, view = world(), requesting("500m")
    other = dataclasses.replace(DEFAULT_PROFILE.with_plugin("NodeResourcesFit", 5), scheduler_name="batch")
    assert w.predictor(view) is not w.predictor(view, other)
    assert counted == [view, view]
