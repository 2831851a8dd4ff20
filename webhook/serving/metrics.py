"""Prometheus metrics, correct across gunicorn's worker processes.

Under `serve`, every worker writes its samples to memory-mapped files in one directory
(prometheus_client's multiprocess mode) and `GET /metrics`, answered by any worker, merges them:
- `prepare_multiprocess_dir` runs in the master before any metric exists: it points
  `PROMETHEUS_MULTIPROC_DIR` at a directory emptied of the previous run's files (stale counters
  from an earlier start would otherwise be added to this one's);
- `mark_worker_dead` runs in the master's `child_exit` hook: the dead worker's `live*` gauges
  (policy in force, certificate expiry) stop being reported; its counters and histogram keep counting.

Without that directory (the Flask test client, `review`), metrics live in this process alone.

The metric objects are made on first use, not at import: prometheus_client fixes single- or
multi-process mode when the first metric is constructed, which must come after the master has
set the directory.

Label values are bounded: decisions come from `Decision`, operations from the four admission
operations (anything else is `unknown`), rules from the policy, handshake failure reasons from
`HANDSHAKE_REASONS`.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from webhook import __version__
from webhook.names import METRICS_DIR_ENV
from webhook.policy import Decision

MULTIPROC_ENV = METRICS_DIR_ENV
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
DECISIONS = tuple(d.value for d in Decision)
# Why a TLS handshake failed (webhook.serving.handshake says what each means).
HANDSHAKE_REASONS = ("http_request", "unknown_ca", "protocol_version", "client_certificate", "eof", "timeout", "other")
# Reviews take ~0.1-1 ms of server time; the top buckets catch a stalled worker.
DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def prepare_multiprocess_dir(path: str | Path) -> Path:
    """Use `path` for the workers' metric files, emptied of an earlier run's (master, at start)."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):  # only prometheus_client's own files
        stale.unlink()
    if "prometheus_client.values" in sys.modules and _metrics.cache_info().currsize:
        raise RuntimeError("metrics were created before the multiprocess directory was set")
    os.environ[MULTIPROC_ENV] = str(directory)
    return directory


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def mark_worker_dead(pid: int) -> None:
    """The master's `child_exit` hook: drop a dead worker's live gauges."""
    if multiprocess_dir():
        from prometheus_client import multiprocess

        untyped: Any = multiprocess  # prometheus_client's multiprocess helpers carry no annotations
        untyped.mark_process_dead(pid)


@lru_cache(maxsize=1)
def _metrics() -> SimpleNamespace:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    registry = CollectorRegistry(auto_describe=True)
    ns = SimpleNamespace(registry=registry)
    ns.requests = Counter(
        "netqos_admission_requests",
        "AdmissionReviews answered, by decision, operation and dry run.",
        ("decision", "operation", "dry_run"),
        registry=registry,
    )
    ns.duration = Histogram(
        "netqos_admission_duration_seconds",
        "Server time to answer one AdmissionReview (decode, decide, encode).",
        buckets=DURATION_BUCKETS,
        registry=registry,
    )
    ns.injections = Counter(
        "netqos_rule_injections",
        "Rules injected into pods (dry runs included), by rule name.",
        ("rule",),
        registry=registry,
    )
    ns.cert_expiry = Gauge(
        "netqos_certificate_expiry_timestamp_seconds",
        "Unix time when a certificate in force expires (earliest over live workers): certificate=serving "
        "for the serving certificate, certificate=ca for the CA beside it (ca.crt), whose copy is the caBundle.",
        ("certificate",),
        registry=registry,
        multiprocess_mode="livemin",
    )
    ns.cert_reloads = Counter(
        "netqos_tls_certificate_reloads",
        "Serving certificate reloads after the files changed, by result (counted per worker process).",
        ("result",),
        registry=registry,
    )
    ns.policy_info = Gauge(
        "netqos_policy_info",
        "1 for the policy in force (sha256 of the policy file) in some live worker.",
        ("sha256",),
        registry=registry,
        multiprocess_mode="livemax",
    )
    ns.policy_rejected = Gauge(
        "netqos_policy_file_rejected",
        "1 while the policy file on disk is invalid and an older policy stays in force.",
        registry=registry,
        multiprocess_mode="livemax",
    )
    ns.policy_reloads = Counter(
        "netqos_policy_reloads",
        "Policy file reloads after it changed, by result (counted per worker process).",
        ("result",),
        registry=registry,
    )
    ns.handshake_errors = Counter(
        "netqos_tls_handshake_errors",
        "TLS handshakes that failed, by reason (unknown_ca: a client rejected our certificate).",
        ("reason",),
        registry=registry,
    )
    # Pre-create the series an operator alerts on, so they read 0 rather than being absent.
    for result in ("success", "failure"):
        ns.cert_reloads.labels(result)
        ns.policy_reloads.labels(result)
    for reason in HANDSHAKE_REASONS:
        ns.handshake_errors.labels(reason)
    ns.by_labels = {}
    ns.by_rule = {}
    if not multiprocess_dir():  # in multiprocess mode render() adds it to the merged registry
        registry.register(_BuildInfo())
    return ns


def observe_review(decision: Decision, operation: str, dry_run: bool, injected: Iterable[str], seconds: float) -> None:
    m = _metrics()
    key = (decision, operation, dry_run)
    child = m.by_labels.get(key)
    if child is None:  # labels() costs a few µs; the combinations are few, so cache the children
        op = operation if operation in OPERATIONS else "unknown"
        child = m.by_labels[key] = m.requests.labels(decision.value, op, "true" if dry_run else "false")
    child.inc()
    m.duration.observe(seconds)
    for rule in injected:
        counter = m.by_rule.get(rule)
        if counter is None:  # as for by_labels; the rules are the policy's few names
            counter = m.by_rule[rule] = m.injections.labels(rule)
        counter.inc()


def observe_invalid(seconds: float) -> None:
    """A request to /mutate that is no usable AdmissionReview (HTTP 4xx)."""
    observe_review(Decision.INVALID, "", False, (), seconds)


def certificate_loaded(not_after: float, ca_not_after: float | None = None) -> None:
    gauge = _metrics().cert_expiry
    gauge.labels("serving").set(not_after)
    if ca_not_after is not None:
        gauge.labels("ca").set(ca_not_after)


def certificate_reload(ok: bool) -> None:
    _metrics().cert_reloads.labels("success" if ok else "failure").inc()


def tls_handshake_error(reason: str) -> None:
    _metrics().handshake_errors.labels(reason if reason in HANDSHAKE_REASONS else "other").inc()


def policy_in_force(sha256: str, previous: str | None = None) -> None:
    m = _metrics()
    if previous and previous != sha256:
        m.policy_info.labels(previous).set(0)
    m.policy_info.labels(sha256).set(1)
    m.policy_rejected.set(0)


def policy_switched(sha256: str, previous: str) -> None:
    """The policy in force changed without a reload of the file (taken from another worker):
    `netqos_policy_file_rejected` stays as it is."""
    m = _metrics()
    if previous != sha256:
        m.policy_info.labels(previous).set(0)
    m.policy_info.labels(sha256).set(1)


def policy_reload(ok: bool) -> None:
    m = _metrics()
    m.policy_reloads.labels("success" if ok else "failure").inc()
    if not ok:
        m.policy_rejected.set(1)


class _BuildInfo:
    """`netqos_build_info`: a constant 1 labelled with the versions, computed at scrape time."""

    def collect(self) -> Iterable[Any]:
        import gunicorn
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(
            "netqos_build_info",
            "Versions of the running webhook; always 1.",
            labels=("version", "python_version", "gunicorn_version"),
        )
        family.add_metric((__version__, platform.python_version(), gunicorn.__version__), 1)
        yield family


def render(accept: str | None = None) -> tuple[bytes, str]:
    """The exposition of every worker's metrics (or this process's), and its content type."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    registry = _metrics().registry
    if multiprocess_dir():
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        untyped: Any = multiprocess  # prometheus_client's multiprocess helpers carry no annotations
        untyped.MultiProcessCollector(registry)
        registry.register(_BuildInfo())
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
