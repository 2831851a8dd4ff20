"""What `netqos-webhook monitor`'s gauges say, and what `status -A -o json` says of the same world,
in one comparable shape: the selected pods by state, the missing ones by namespace, the
latency-sensitive pods by node class and the stranded ones by namespace. The end-to-end test and
the scale benchmark compare the two with it."""

from __future__ import annotations

import urllib.request
from collections import Counter
from collections.abc import Mapping
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from webhook import placement

# status's placement keys -> the monitor's node_class label
CLASSES = {"high": "fast", "low": "slow", "other": "other", "unlabelled": "unlabelled", "pending": "pending"}
Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scrape(url: str, timeout: float = 5) -> Samples:
    """Every sample of the metrics page at `url`: name -> sorted labels -> value."""
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return parse(answer.read().decode())


def parse(text: str) -> Samples:
    """Every sample of a metrics page's text (`scrape`'s shape)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def gauges_say(metrics: Samples) -> dict[str, Any]:
    """The monitor's judgement, from its samples."""
    states: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    for labels, n in metrics.get("netqos_monitor_selected_pods", {}).items():
        of = dict(labels)
        states[of["state"]] += int(n)
        if of["state"] == "missing":
            missing[of["namespace"]] += int(n)
    classes = {
        dict(k)["node_class"]: int(v) for k, v in metrics.get("netqos_monitor_latency_sensitive_pods", {}).items()
    }
    stranded = {dict(k)["namespace"]: int(v) for k, v in metrics.get("netqos_monitor_stranded_pods", {}).items()}
    return {  # plain dicts: they compare as Counters do, and dataclasses.asdict copies them whole
        "states": dict(+states),
        "missing": dict(+missing),
        "classes": {k: v for k, v in classes.items() if v},
        "stranded": {k: v for k, v in stranded.items() if v},
    }


def status_says(report: Mapping[str, Any]) -> dict[str, Any]:
    """status's judgement, from its `-o json` report, in `gauges_say`'s shape. A stranded pod is one
    off the fast nodes whose only reason is that a fast node could take it (now, or once its
    usage is left aside), as the monitor's stranded gauge counts it."""
    states = Counter({k: v for k, v in report["pods"].items() if k != "selected" and v})
    missing = Counter(p["namespace"] for p in report["missing"])
    classes = {CLASSES[k]: v for k, v in report["placement"].items() if k in CLASSES and v}
    feasible = {placement.FEASIBLE_NOW, placement.FEASIBLE_WITHOUT_USAGE}
    stranded = Counter(
        p["namespace"]
        for p in report["not_on_high"]
        if p["node"] and tuple(p["why"])[:1] and p["why"][0] in feasible and len(p["why"]) == 1
    )
    return {"states": dict(states), "missing": dict(missing), "classes": classes, "stranded": dict(stranded)}
