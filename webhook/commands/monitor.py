"""`netqos-webhook monitor`: `status`'s judgement of the selected pods, kept live and served as
Prometheus gauges.

Read-only, long-running. It lists once and then watches, each from the resourceVersion of what it
last saw (`clusterread.list_pages`, `clusterread.watch`: every read goes through
`webhook.commands.clusterread`, over the one connection of the run):

- every Node;
- the selected pods, one watch per rule of the policy in force, with the rule's podSelector as the
  server-side `labelSelector` and finished pods left out (`clusterread.RUNNING`);
- the pods bound to a node (`clusterread.ASSIGNED_NOT_FINISHED`), of which only those on a target
  ("fast") node are kept: what they request is the room the fast nodes no longer have. A node that
  becomes a target node has its pods listed at once (`spec.nodeName=NAME`).

Each watch asks for bookmarks (allowWatchBookmarks), so a quiet watch still moves its
resourceVersion on; ends after `--watch-timeout` seconds (timeoutSeconds: a deadline on every
request), and resumes from where it was; after a 410 Gone (a resourceVersion etcd compacted
away) it lists again. The objects are kept slim (`webhook.status.live`): only the fields the
judgement reads.

The policy in force, the MutatingWebhookConfiguration, the admission policies and the Namespaces
are read as `status` reads them, again every `--refresh` seconds; a policy whose selectors changed
restarts the pod watches. The judgement is `status`'s (`webhook.status.live.World`), published at
most once per `--interval` while events arrive. Logs are JSON lines on stderr; SIGTERM or SIGINT
stop it at once (exit 0).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from webhook.commands import flags, typed
from webhook.errors import RuntimeFailure, UsageError
from webhook.names import DEFAULT_NAMESPACE

DEFAULT_METRICS_BIND = "0.0.0.0:9464"
HELP = (
    "Watch the cluster, read-only, and serve Prometheus gauges of what status judges: the selected pods by "
    "namespace, rule and state (injected, explicit, opted out, missing), the latency-sensitive pods by the "
    "class of their node, the pods stranded off the fast nodes while one has room, the room left on the fast "
    f"nodes, and the monitor's own lag and watch restarts. Metrics on --metrics-bind (default "
    f"{DEFAULT_METRICS_BIND}) at /metrics; logs are JSON lines on stderr; SIGTERM stops it."
)
EXAMPLE = "netqos-webhook monitor --metrics-bind 0.0.0.0:9464"
_BIND = re.compile(r"(?P<host>\[[0-9a-fA-F:.]+\]|[^:\[\]]*):(?P<port>\d+)")


@dataclass(frozen=True)
class MonitorArgs(flags.ClusterArgs):
    webhook_namespace: str = DEFAULT_NAMESPACE
    config: str | None = None
    metrics_bind: str = DEFAULT_METRICS_BIND
    refresh: float = 60  # seconds between reads of the policy, registration and namespaces
    interval: float = 1  # seconds between publications of the gauges while events arrive
    watch_timeout: int = 300  # timeoutSeconds of each watch request


def add_command(sub: flags.Subcommands) -> None:
    p = flags.command(sub, "monitor", HELP, EXAMPLE, _main)
    flags.cluster(p, "watch the cluster of ")
    flags.webhook_namespace(p, f"namespace the webhook runs in (default {DEFAULT_NAMESPACE})")
    flags.config(p, "judge by this policy file instead of the one the installed webhook serves (its ConfigMap)")
    p.add_argument(
        "--metrics-bind",
        metavar="HOST:PORT",
        default=DEFAULT_METRICS_BIND,
        help=f"where to serve /metrics (plain HTTP; default {DEFAULT_METRICS_BIND})",
    )
    flags.number(p, "--refresh", 5, 3600, 60, "seconds between reads of the policy, registration and namespaces")
    flags.number(p, "--interval", 0, 60, 1, "seconds between updates of the gauges while events arrive", fraction=True)
    flags.number(p, "--watch-timeout", 10, 3600, 300, "timeoutSeconds of each watch request")


def _main(parsed: argparse.Namespace, out: TextIO) -> int:
    code = run(typed(MonitorArgs, parsed), out)
    # Stopped: end the process now. The interpreter's own teardown (the kubernetes client's
    # thousands of modules, the watch threads' sockets) takes longer than the second SIGTERM allows;
    # nothing is left to write but the standard streams.
    out.flush()
    sys.stderr.flush()
    os._exit(code)


def check_bind(bind: str) -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets); `UsageError` otherwise."""
    match = _BIND.fullmatch(bind)
    if match is None or not 0 < int(match["port"]) < 65536:
        raise UsageError(f"--metrics-bind {bind!r} is not HOST:PORT with a port from 1 to 65535 (e.g. 0.0.0.0:9464)")
    return match["host"].strip("[]") or "0.0.0.0", int(match["port"])


def run(args: MonitorArgs, out: TextIO, stop: threading.Event | None = None) -> int:
    """Watch and serve until SIGTERM/SIGINT (or `stop` is set); exit 0. Raises `PolicyError` for an
    unusable --config, `UsageError` for a --metrics-bind that is no HOST:PORT, `RuntimeFailure`
    when it cannot listen there, `clusterread.ClusterError` when the cluster cannot be read at start
    (later failures are logged and retried)."""
    from prometheus_client import CollectorRegistry, start_http_server

    from webhook.commands import clusterread
    from webhook.policy_file import load_policy

    host, port = check_bind(args.metrics_bind)
    override = load_policy(args.config) if args.config else None
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    connection = clusterread.connect(args)
    monitor = Monitor(args, connection, override, stop)
    with clusterread.reader_of(connection) as reader:
        monitor.reframe(reader)
        registry = CollectorRegistry(auto_describe=True)
        registry.register(monitor.collector())
        try:
            server, _ = start_http_server(port, host, registry)
        except OSError as err:
            raise RuntimeFailure(
                f"--metrics-bind {args.metrics_bind}: cannot listen there: {err.strerror or err}"
            ) from None
        log("INFO", "monitor started", metrics=f"{host}:{port}", policy=monitor.policy_source)
        monitor.start()
        # The judging runs beside the main thread, so a stop is answered at once however long
        # one judgement of a large world takes (the threads are daemons: they end with the process).
        threading.Thread(target=monitor.judge, args=(reader,), name="judge", daemon=True).start()
        stop.wait()
        server.server_close()  # its thread, a daemon, ends with the process: no wait for its poll
    log("INFO", "monitor stopped")
    return 0


def log(level: str, message: str, **fields: Any) -> None:
    """One JSON object per line on stderr, as the server logs."""
    line = {"time": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"), "level": level}
    line.update(logger="webhook.monitor", message=message, **fields)
    sys.stderr.write(json.dumps(line) + "\n")
    sys.stderr.flush()


@dataclass(frozen=True)
class _Watch:
    """One list-then-watch: what it reads and where its events go (under the monitor's lock)."""

    resource: str  # the `resource` label of the restarts counter: nodes | pods
    name: str
    label_selector: str | None
    field_selector: str | None
    replace: Callable[[list[dict[str, Any]]], None]
    event: Callable[[str, dict[str, Any]], None]
    slim: Callable[[dict[str, Any]], dict[str, Any] | None]  # reduce a listed object (None: not kept)
    after: threading.Event | None = None  # list only once this is set (the bound pods: once the nodes are known)
    listed: threading.Event = field(default_factory=threading.Event)  # set after its first list


@dataclass
class Monitor:
    """The world, the watches that feed it and the gauges published from it."""

    args: MonitorArgs
    connection: Any  # clusterread.Connection
    override: Any  # a --config Policy, or None
    stop: threading.Event
    world: Any = None  # live.World, from the first `reframe`
    policy_source: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    generation: int = 0  # the pod watches' generation: a policy with other selectors starts new ones
    restarts: Counter[str] = field(default_factory=Counter)
    published: Any = None  # live.Gauges
    dirty_since: float | None = None
    _fingerprint: str = ""
    _selectors: tuple[str, ...] = ()
    _threads: list[threading.Thread] = field(default_factory=list)
    _nodes_listed: threading.Event = field(default_factory=threading.Event)
    _bound_listed: threading.Event = field(default_factory=threading.Event)

    def reframe(self, reader: Any) -> None:
        """Read what status reads besides pods and nodes; judge every pod again if it changed."""
        frame = _frame(reader, self.args, self.override)
        fingerprint = repr((frame.policy, frame.policy_problem, frame.namespaces, _version(frame.configuration)))
        if fingerprint == self._fingerprint:
            return
        from webhook.commands import clusterread
        from webhook.status import live

        selectors = tuple(clusterread.label_selector(r.pod_selector) for r in frame.policy.rules)
        with self.lock:
            self._fingerprint, self.policy_source = fingerprint, frame.policy_source
            if self.world is None:
                self.world = live.World(frame)
            else:
                self.world.reframe(frame)
                log("INFO", "policy, registration or namespaces changed", policy=frame.policy_source)
            self._touch()
        if frame.policy_problem:
            log("WARNING", "the policy in force cannot be used", problem=frame.policy_problem)
        if selectors != self._selectors and self._threads:
            with self.lock:
                self.generation += 1
                self.world.pods.clear()
                self.world.judged.clear()
            self._selectors = selectors
            self._start_pods()
        self._selectors = selectors

    def judge(self, reader: Any) -> None:
        """Publish the gauges every `--interval` while anything changed; read the frame again
        every `--refresh`. Until the monitor stops."""
        from webhook.commands import clusterread

        next_refresh = time.monotonic() + self.args.refresh
        while not self.stop.wait(self.args.interval or 0.05):
            self.publish()
            if time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + self.args.refresh
                try:
                    self.reframe(reader)
                except clusterread.ClusterError as err:
                    log("ERROR", "cannot read the policy, registration or namespaces", error=str(err))

    def start(self) -> None:
        from webhook.commands import clusterread

        w = self.world
        nodes = _Watch("nodes", "nodes", None, None, self._replace_nodes, self._node_event, _slim_node)
        self._spawn(dataclasses.replace(nodes, listed=self._nodes_listed), -1)
        self._spawn(
            _Watch(
                "pods",
                "bound pods",
                None,
                clusterread.ASSIGNED_NOT_FINISHED,
                lambda items: w.replace_bound(items),
                lambda kind, obj: w.bound_event(kind, obj),
                self._slim_bound,
                after=self._nodes_listed,
                listed=self._bound_listed,
            ),
            -1,
        )
        self._start_pods()

    def _start_pods(self) -> None:
        from webhook.commands import clusterread

        w = self.world
        for rule, selector in zip(w.frame.policy.rules, self._selectors, strict=True):

            def replace(items: list[dict[str, Any]], store: str = rule.name) -> None:
                w.replace_pods(store, items)

            def event(kind: str, obj: dict[str, Any], store: str = rule.name) -> None:
                w.pod_event(store, kind, obj)

            self._spawn(
                _Watch("pods", f"pods of rule {rule.name}", selector, clusterread.RUNNING, replace, event, _slim_pod),
                self.generation,
            )

    def _spawn(self, watch: _Watch, generation: int) -> None:
        thread = threading.Thread(target=self._follow, args=(watch, generation), name=watch.name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _live(self, generation: int) -> bool:
        return not self.stop.is_set() and generation in (-1, self.generation)

    def _follow(self, watch: _Watch, generation: int) -> None:
        """List, then watch from the list's resourceVersion, resuming after each watch ends; list
        again after a 410; back off after a failure. Runs until the monitor stops (or, for a pod
        watch, until the policy's selectors change)."""
        from webhook.commands import clusterread

        reader = clusterread.reader_of(self.connection)
        version: str | None = None
        backoff = 1.0
        while watch.after is not None and not watch.after.wait(0.5):
            if not self._live(generation):
                return
        while self._live(generation):
            try:
                if version is None:
                    version = self._list(reader, watch, generation)
                    log("INFO", "listed", watch=watch.name, resourceVersion=version)
                for kind, obj in clusterread.watch(
                    reader,
                    _KIND[watch.resource],
                    version,
                    watch.label_selector,
                    watch.field_selector,
                    timeout_seconds=self.args.watch_timeout,
                ):
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind == "BOOKMARK":
                        continue
                    with self.lock:
                        if not self._live(generation):
                            return
                        watch.event(kind, obj)
                        self._touch()
                backoff = 1.0
            except clusterread.Expired as err:
                version = None
                self.restarts[watch.resource] += 1
                log("WARNING", "watch expired: listing again", watch=watch.name, error=str(err))
            except clusterread.ClusterError as err:
                self.restarts[watch.resource] += 1
                log("ERROR", "watch failed: retrying", watch=watch.name, error=str(err), retry_seconds=backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    def _list(self, reader: Any, watch: _Watch, generation: int) -> str:
        from webhook.commands import clusterread

        items: list[dict[str, Any]] = []
        version = ""
        for page in clusterread.list_pages(reader, _KIND[watch.resource], watch.label_selector, watch.field_selector):
            items += [s for obj in page.get("items") or () if (s := watch.slim(obj)) is not None]
            version = str((page.get("metadata") or {}).get("resourceVersion") or version)
        with self.lock:
            if self._live(generation):
                watch.replace(items)
                self._touch()
        watch.listed.set()
        return version

    def _replace_nodes(self, items: list[dict[str, Any]]) -> None:
        before = self.world.fast_names()
        self.world.replace_nodes(items)
        self._list_pods_of(self.world.fast_names() - before)

    def _node_event(self, kind: str, obj: dict[str, Any]) -> None:
        before = self.world.fast_names()
        if self.world.node_event(kind, obj):
            self._list_pods_of(self.world.fast_names() - before)

    def _list_pods_of(self, names: Iterable[str]) -> None:
        """The pods of nodes that just became target nodes (their pods were not kept): listed in a
        thread of their own, so the node watch goes on."""
        wanted = sorted(names)
        if not wanted or not self._bound_listed.is_set():  # the bound pods' own first list reads them
            return

        def read() -> None:
            from webhook.commands import clusterread

            try:
                with clusterread.reader_of(self.connection) as reader:
                    pods = [_slim_pod(p) for p in clusterread.pods_on_nodes(reader, wanted)]
            except clusterread.ClusterError as err:
                log("ERROR", "cannot list the pods of new fast nodes", nodes=wanted, error=str(err))
                return
            with self.lock:
                for pod in pods:
                    self.world.bound_event("ADDED", pod)
                self._touch()

        threading.Thread(target=read, name="pods of new fast nodes", daemon=True).start()

    def _slim_bound(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        from webhook.status import live

        node = str((obj.get("spec") or {}).get("nodeName") or "")
        return live.slim_pod(obj) if node in self.world.fast_names() else None  # a frozen set: no lock

    def _touch(self) -> None:
        if self.dirty_since is None:
            self.dirty_since = time.monotonic()

    def publish(self) -> None:
        """The gauges, judged again if anything changed since they were last."""
        with self.lock:
            if self.dirty_since is None and self.published is not None:
                return
            self.dirty_since = None
            self.published = self.world.gauges()

    def lag(self) -> float:
        """Seconds the oldest change not yet in the gauges has waited (0: they are current)."""
        since = self.dirty_since
        return 0.0 if since is None else max(0.0, time.monotonic() - since)

    def collector(self) -> Any:
        return _Collector(self)


_KIND = {"nodes": "Node", "pods": "Pod"}


def _slim_pod(obj: dict[str, Any]) -> dict[str, Any]:
    from webhook.status import live

    return live.slim_pod(obj)


def _slim_node(obj: dict[str, Any]) -> dict[str, Any]:
    from webhook.status import live

    return live.slim_node(obj)


def _version(obj: Any) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "") if isinstance(obj, dict) else ""


def _frame(reader: Any, args: MonitorArgs, override: Any) -> Any:
    """What status reads besides the pods and nodes (`commands.status`'s view, the same reads)."""
    from webhook import scope, status
    from webhook.commands import clusterread
    from webhook.commands.clusterread import get_object, listed, policy_of
    from webhook.commands.plan import SchedulerProfiles
    from webhook.names import CONFIGURATION_NAME, DEFAULT_SERVICE

    ns = args.webhook_namespace
    deployment = get_object(reader, "Deployment", status.DeploymentJSON, DEFAULT_SERVICE, ns)
    in_force = status.InForce(*policy_of(reader, deployment, ns, override, args.config))
    if in_force.problem is not None:  # the ConfigMap is unusable: the pods keep their last good policy
        slices = listed(reader, "EndpointSlice", ns, label_selector=f"{scope.SERVICE_NAME_LABEL}={DEFAULT_SERVICE}")
        in_force = status.choose(in_force, *clusterread.served_policies(reader, ns, slices))
    notes: list[str] = []
    version = clusterread.release(reader, notes)
    admission = clusterread.admission_policies(reader)
    return status.ClusterView(
        webhook_namespace=ns,
        policy=in_force.policy,
        policy_source=in_force.source,
        configuration=get_object(
            reader, "MutatingWebhookConfiguration", status.WebhookConfigurationJSON, CONFIGURATION_NAME
        ),
        deployment=deployment,
        endpoint_slices=[],
        secret=None,
        namespaces=clusterread.namespaces(reader),
        nodes=[],
        pods=[],
        pods_on_nodes=lambda high, count: [],
        now=dt.datetime.now(dt.UTC),
        policy_problem=in_force.problem,
        policy_known=in_force.known,
        admission_policies=admission.policies,
        admission_policy_bindings=admission.bindings,
        profiles=SchedulerProfiles().for_cluster(version),
        version=version,
        version_notes=tuple(notes),
    )


# --- the metrics ---------------------------------------------------------------------------------


@dataclass(eq=False)  # registries key collectors by identity
class _Collector:
    """Each scrape reads the gauges last published: a label set that is gone is gone from /metrics."""

    monitor: Monitor

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from webhook.status import live

        gauges = self.monitor.published
        if gauges is not None:
            selected = GaugeMetricFamily(
                "netqos_monitor_selected_pods",
                "Pods a rule of the policy in force selects, by namespace, rule and state "
                "(injected, explicit, opted_out, missing, injected_earlier), as status counts them.",
                labels=("namespace", "rule", "state"),
            )
            for (namespace, rule, state), n in sorted(gauges.selected.items()):
                selected.add_metric((namespace, rule, state), n)
            yield selected
            yield _family(
                GaugeMetricFamily,
                "netqos_monitor_latency_sensitive_pods",
                "Selected pods by the class of their node for their rule: fast, slow, other, unlabelled, pending.",
                "node_class",
                {c: gauges.node_class.get(c, 0) for c in live.NODE_CLASSES.values()},
            )
            yield _family(
                GaugeMetricFamily,
                "netqos_monitor_stranded_pods",
                "Selected pods bound off their target nodes while a target node passes the scheduler's filters "
                "for them now, by namespace.",
                "namespace",
                gauges.stranded,
            )
            yield _family(
                GaugeMetricFamily,
                "netqos_monitor_fast_nodes_free",
                "Room left on the fast (target) nodes: allocatable less what their pods request; cpu in cores, "
                "memory in bytes, pods in pods.",
                "resource",
                gauges.fast_room,
            )
            if gauges.fast_nodes is not None:
                yield GaugeMetricFamily(
                    "netqos_monitor_fast_nodes", "Nodes of a rule's best class.", value=gauges.fast_nodes
                )
        yield GaugeMetricFamily(
            "netqos_monitor_lag_seconds",
            "Seconds the oldest change seen by the watches has waited to be in these gauges (0: current).",
            value=self.monitor.lag(),
        )
        yield _family(
            CounterMetricFamily,
            "netqos_monitor_watch_restarts",
            "Watches that started over after a failure or a 410 Gone (relisted), by resource.",
            "resource",
            {r: self.monitor.restarts.get(r, 0) for r in _KIND},
        )


def metric_names() -> set[str]:
    """The name of every family the monitor exports (a counter's without `_total`)."""
    from types import SimpleNamespace

    from webhook.status import live

    empty = SimpleNamespace(published=live.Gauges({}, {}, {}, 0, {}), lag=lambda: 0.0, restarts=Counter())
    return {family.name for family in _Collector(empty).collect()}  # type: ignore[arg-type]


def _family(cls: Any, name: str, documentation: str, label: str, values: Mapping[str, float]) -> Any:
    family = cls(name, documentation, labels=(label,))
    for key, value in sorted(values.items()):
        family.add_metric((key,), value)
    return family
