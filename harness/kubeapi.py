"""A fake Kubernetes API server on loopback: the REST paths the `kubernetes` client uses to read, and evictions.

It serves a fixed `Snapshot` of API objects (plain JSON data) over HTTP on 127.0.0.1, so tests and
benchmarks drive the real client, through a real kubeconfig, instead of a mock of the library:

- `GET /api/v1[/namespaces/NS]/RESOURCE[/NAME]` and `GET /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME]`;
  `GET /api/v1/namespaces/NAME` is the Namespace itself;
- lists honour `labelSelector` (equality- and set-based, as `kubectl -l` writes them),
  `fieldSelector` (`=`, `==`, `!=` on `metadata.name`, `metadata.namespace`, `spec.nodeName`,
  `status.phase`; `spec.nodeName=NAME` answered from an index, as the API server's watch cache
  indexes pods by node), `limit` and `continue` (an opaque token; `remainingItemCount` is set);
- `POST /api/v1/namespaces/NS/pods/NAME/eviction` (the Eviction API, `policy/v1`) answers as the API
  server does: 201 and the pod is gone (later reads miss it); 404 for a pod that does not exist
  (or is gone); 409 when `deleteOptions.preconditions.uid` names another pod; 429 when a
  PodDisruptionBudget of the snapshot selects the pod and its `status.disruptionsAllowed` is 0
  (each eviction it allows takes one; the Status names the DisruptionBudget cause); 403 when
  `pods/eviction` is forbidden; any status `Snapshot.eviction_answers` scripts for a pod
  (`NS/NAME`; a scripted 429 is API Priority and Fairness's: no cause, `Retry-After: 1`).
  Evictions are recorded in order;
- `POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews` answers whether the reader may
  create pods (`Snapshot.admit` is set and `pods/create` is not forbidden) and nothing else; and
  `POST /api/v1/namespaces/NS/pods?dryRun=All` answers 201 with `Snapshot.admit(pod)`, the pod as
  the test says the API server's admission leaves it (403 where it may not; nothing is stored);
- `POST /apis/events.k8s.io/v1/namespaces/NS/events` stores nothing and answers 201: the Events
  are recorded in order (403 when `events` is forbidden); `POST /api/v1/namespaces/NS/configmaps`
  and `PUT .../configmaps/NAME` write a ConfigMap that later gets read back (409 when one of that
  name exists, or the update's `metadata.resourceVersion` is not the stored one's; 403 when
  `configmaps@write` is forbidden). `Snapshot.concurrent_writes` scripts another writer: before
  the first update of `NS/NAME`, that object is stored in its place;
- a resource listed in `Snapshot.forbidden` answers 403 with a `Status`, as RBAC does (`RESOURCE@cluster`:
  only its reads across every namespace, as for a user with a Role but no ClusterRole); a missing
  object answers 404; a request without the snapshot's bearer token answers 401;
- every request is recorded (`Running.requests`) and every TCP connection accepted is counted
  (`Running.connections`): how many a client opened, keeping them alive as HTTP/1.1 lets it.

Objects are stored serialised (bytes) beside the labels and fields selectors read, so a snapshot of
150,000 pods costs the server a few hundred MiB, and a page is a join of stored bytes. Lists are
ordered by namespace and name, as etcd returns them.
"""

from __future__ import annotations

import base64
import bisect
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from harness import pods

TOKEN = "netqos-test-token"
# resource (plural, as in the URL) -> (apiVersion, kind)
KINDS = {
    "namespaces": ("v1", "Namespace"),
    "limitranges": ("v1", "LimitRange"),
    "runtimeclasses": ("node.k8s.io/v1", "RuntimeClass"),
    "nodes": ("v1", "Node"),
    "pods": ("v1", "Pod"),
    "configmaps": ("v1", "ConfigMap"),
    "replicationcontrollers": ("v1", "ReplicationController"),
    "secrets": ("v1", "Secret"),
    "services": ("v1", "Service"),
    "deployments": ("apps/v1", "Deployment"),
    "replicasets": ("apps/v1", "ReplicaSet"),
    "statefulsets": ("apps/v1", "StatefulSet"),
    "daemonsets": ("apps/v1", "DaemonSet"),
    "jobs": ("batch/v1", "Job"),
    "cronjobs": ("batch/v1", "CronJob"),
    "endpointslices": ("discovery.k8s.io/v1", "EndpointSlice"),
    "poddisruptionbudgets": ("policy/v1", "PodDisruptionBudget"),
    "mutatingwebhookconfigurations": ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    "mutatingadmissionpolicies": ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy"),
    "mutatingadmissionpolicybindings": ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding"),
    "validatingadmissionpolicies": ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    "validatingadmissionpolicybindings": ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
}
RESOURCES = {kind: resource for resource, (_, kind) in KINDS.items()}
VERSION = {"major": "1", "minor": "37", "gitVersion": "v1.37.2"}  # GET /version
FIELDS = ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase")


@dataclass(frozen=True)
class Stored:
    namespace: str
    name: str
    labels: Mapping[str, str]
    fields: Mapping[str, str]
    body: bytes


@dataclass
class Snapshot:
    """The cluster the server shows: objects by resource, and the resources RBAC forbids."""

    objects: dict[str, list[Stored]] = field(default_factory=dict)
    forbidden: set[str] = field(default_factory=set)
    eviction_answers: dict[str, int] = field(default_factory=dict)  # "NS/NAME" -> the status its eviction gets
    version: Mapping[str, str] = field(default_factory=lambda: dict(VERSION))  # what GET /version answers
    # "NS/NAME" -> the ConfigMap another writer stores just before the first update of it
    concurrent_writes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    # a dry-run create's answer: the pod as admission leaves it (None: RBAC lets nobody create pods)
    admit: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def add(self, obj: Mapping[str, Any]) -> None:
        resource = RESOURCES[obj["kind"]]
        meta = obj.get("metadata") or {}
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        fields = {
            "metadata.name": meta.get("name", ""),
            "metadata.namespace": meta.get("namespace", ""),
            "spec.nodeName": spec.get("nodeName", "") if isinstance(spec, dict) else "",
            "status.phase": status.get("phase", "") if isinstance(status, dict) else "",
        }
        body = json.dumps(obj, separators=(",", ":")).encode()
        stored = Stored(meta.get("namespace", ""), meta["name"], dict(meta.get("labels") or {}), fields, body)
        self.objects.setdefault(resource, []).append(stored)

    def add_all(self, objs: Iterable[Mapping[str, Any]]) -> Snapshot:
        for obj in objs:
            self.add(obj)
        return self

    def sort(self) -> None:
        for items in self.objects.values():
            items.sort(key=lambda s: (s.namespace, s.name))


# --- selectors ------------------------------------------------------------------------------------

_SET = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\(([^)]*)\)\s*")
_EQ = re.compile(r"^\s*([^\s!=,()]+)\s*(==|=|!=)\s*([^\s,()]*)\s*")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=,()]+)\s*")


def parse_label_selector(text: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """`k=v,k!=v,k in (a,b),k notin (a),k,!k` as (key, operator, values); ValueError when malformed."""
    out: list[tuple[str, str, tuple[str, ...]]] = []
    rest = text.strip()
    while rest:
        if m := _SET.match(rest):
            values = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            out.append((m.group(1), "In" if m.group(2) == "in" else "NotIn", values))
        elif m := _EQ.match(rest):
            out.append((m.group(1), "NotIn" if m.group(2) == "!=" else "In", (m.group(3),)))
        elif m := _EXISTS.match(rest):
            out.append((m.group(2), "DoesNotExist" if m.group(1) else "Exists", ()))
        else:
            raise ValueError(f"unable to parse requirement: {rest!r}")
        rest = rest[m.end() :]
        if rest and not rest.startswith(","):
            raise ValueError(f"expected ',' at {rest!r}")
        rest = rest[1:]
    return out


def labels_match(requirements: list[tuple[str, str, tuple[str, ...]]], labels: Mapping[str, str]) -> bool:
    for key, op, values in requirements:
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def parse_field_selector(text: str) -> list[tuple[str, bool, str]]:
    """`f=v,f!=v` as (field, equal, value); ValueError for a field the API server does not index."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.match(r"^([\w.]+)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise ValueError(f"invalid field selector {part!r}")
        if m.group(1) not in FIELDS:
            raise ValueError(f'field label not supported: "{m.group(1)}"')
        out.append((m.group(1), m.group(2) != "!=", m.group(3)))
    return out


# --- the server ---------------------------------------------------------------------------------


def status_body(code: int, reason: str, message: str, causes: list[dict[str, str]] | None = None) -> bytes:
    """A `Status` object, as the API server answers a failed request (`causes`: its details.causes)."""
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if causes is not None:
        status["details"] = {"causes": causes}
    return json.dumps(status).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm on, each response would wait
    # for the client's delayed ACK (40 ms). Real API servers (Go) disable it too.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read their own output
        pass

    def do_GET(self) -> None:  # the http.server API names it
        self.server.requests.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            code, body = self._answer(url.path, query)
        except ValueError as err:
            code, body = 400, status_body(400, "BadRequest", str(err))
        self._send(code, body)

    def do_POST(self) -> None:  # the http.server API names it
        self.server.requests.append(f"POST {self.path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if parts == ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"]:
            self._send(201, self.server.review(body))
            return
        if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            self._send(*self.server.dry_run(parts[3], body, parse_qs(urlsplit(self.path).query)))
            return
        if len(parts) == 6 and parts[:4] == ["apis", "events.k8s.io", "v1", "namespaces"] and parts[5] == "events":
            self._send(*self.server.record_event(parts[4], body))
            return
        if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
            self._send(*self.server.write_config_map(parts[3], None, body))
            return
        if len(parts) != 7 or parts[:3] != ["api", "v1", "namespaces"] or (parts[4], parts[6]) != ("pods", "eviction"):
            self._send(
                405, status_body(405, "MethodNotAllowed", f"the server does not allow this method ({self.path})")
            )
            return
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            self._send(400, status_body(400, "BadRequest", "the request body is not a JSON object"))
            return
        code, answer = self.server.evict(parts[3], parts[5], request)
        # a 429 without a DisruptionBudget cause is API Priority and Fairness's: it says when to retry
        throttled = code == 429 and b'"details"' not in answer
        self._send(code, answer, {"Retry-After": "1"} if throttled else {})

    def do_PUT(self) -> None:  # the http.server API names it: updates of ConfigMaps only
        self.server.requests.append(f"PUT {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._send(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        parts = [p for p in urlsplit(self.path).path.split("/") if p]
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
            self._send(*self.server.write_config_map(parts[3], parts[5], body))
            return
        self._send(405, status_body(405, "MethodNotAllowed", f"the server does not allow this method ({self.path})"))

    def _send(self, code: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self, path: str, query: dict[str, str]) -> tuple[int, bytes]:
        parts = [p for p in path.split("/") if p]
        if parts == ["version"]:  # by default the newest release the project knows, as its API server reports it
            return 200, json.dumps(self.server.snapshot.version).encode()
        if parts[:2] == ["api", "v1"]:
            rest = parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            rest = parts[3:]
        else:
            return 404, status_body(404, "NotFound", f"the server could not find the requested resource ({path})")
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in KINDS or len(rest) > 2:
            return 404, status_body(404, "NotFound", f"the server could not find the requested resource ({path})")
        resource, name = rest[0], (rest[1] if len(rest) == 2 else None)
        snapshot = self.server.snapshot
        verb = "get" if name else "list"
        if resource in snapshot.forbidden or (namespace is None and f"{resource}@cluster" in snapshot.forbidden):
            scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            message = (
                f'{resource} is forbidden: User "netqos-reader" cannot {verb} resource "{resource}"'
                f' in API group "{KINDS[resource][0].rpartition("/")[0]}"{scope}'
            )
            return 403, status_body(403, "Forbidden", message)
        items = snapshot.objects.get(resource, [])
        gone = self.server.gone if resource == "pods" else set()
        written = self.server.written.get((namespace or "", name or "")) if resource == "configmaps" else None
        if written is not None:
            return 200, json.dumps(written).encode()
        if name:
            for s in items:
                if (
                    s.name == name
                    and (namespace is None or s.namespace == namespace)
                    and (s.namespace, s.name) not in gone
                ):
                    return 200, s.body
            return 404, status_body(404, "NotFound", f'{resource} "{name}" not found')
        return 200, self._list(resource, items, namespace, query, gone)

    def _list(
        self,
        resource: str,
        items: list[Stored],
        namespace: str | None,
        query: dict[str, str],
        gone: set[tuple[str, str]],
    ) -> bytes:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
        limit = int(query.get("limit") or 0)
        start = int(base64.b64decode(query["continue"]).decode()) if query.get("continue") else 0
        page: list[bytes] = []
        position = start
        candidates: Iterable[int] = range(start, len(items))
        node = next((v for f, equal, v in fields if f == "spec.nodeName" and equal), None)
        if node:  # `spec.nodeName=` (empty) selects the unbound pods: no index for those
            on_node = self.server.by_node.get(resource, {}).get(node, [])
            candidates = on_node[bisect.bisect_left(on_node, start) :]
        for position in candidates:
            s = items[position]
            if namespace is not None and s.namespace != namespace:
                continue
            if labels and not labels_match(labels, s.labels):
                continue
            if any((s.fields.get(f) == v) != equal for f, equal, v in fields):
                continue
            if gone and (s.namespace, s.name) in gone:
                continue
            if limit and len(page) == limit:
                break
            page.append(s.body)
        else:
            position = len(items)
        meta: dict[str, Any] = {"resourceVersion": "1"}
        if position < len(items):
            meta["continue"] = base64.b64encode(str(position).encode()).decode()
            meta["remainingItemCount"] = len(items) - position  # an upper bound, as with selectors
        api_version, kind = KINDS[resource]
        head = json.dumps({"apiVersion": api_version, "kind": f"{kind}List", "metadata": meta})
        return head[:-1].encode() + b',"items":[' + b",".join(page) + b"]}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        snapshot.sort()
        self.snapshot = snapshot
        # resource -> spec.nodeName -> positions in the sorted list, ascending
        self.by_node: dict[str, dict[str, list[int]]] = {}
        for resource, stored in snapshot.objects.items():
            for i, s in enumerate(stored):
                if s.fields["spec.nodeName"]:
                    self.by_node.setdefault(resource, {}).setdefault(s.fields["spec.nodeName"], []).append(i)
        # the paths asked for (the latest 10,000), for tests that check what was sent
        self.requests: deque[str] = deque(maxlen=10_000)
        self.connections = 0  # TCP connections accepted: a client that keeps its connection alive opens one
        self.lock = threading.Lock()
        self.gone: set[tuple[str, str]] = set()  # evicted pods
        self.evictions: list[tuple[str, str, int]] = []  # (namespace, name, status) of every eviction asked for
        self.events: list[dict[str, Any]] = []  # every Event created, in order
        self.written: dict[tuple[str, str], dict[str, Any]] = {}  # ConfigMaps created or updated
        self.concurrent_done: set[str] = set()  # the concurrent writes stored already
        self.budgets = [_Budget.of(json.loads(s.body)) for s in snapshot.objects.get("poddisruptionbudgets", [])]

    def get_request(self) -> tuple[Any, Any]:
        """Each connection accepted, counted."""
        accepted = super().get_request()
        with self.lock:
            self.connections += 1
        return accepted

    def record_event(self, namespace: str, body: bytes) -> tuple[int, bytes]:
        """An Event created: recorded, not stored."""
        if "events" in self.snapshot.forbidden:
            message = (
                f'events.events.k8s.io is forbidden: User "netqos-reader" cannot create resource "events" in API '
                f'group "events.k8s.io" in the namespace "{namespace}"'
            )
            return 403, status_body(403, "Forbidden", message)
        event = json.loads(body)
        with self.lock:
            self.events.append(event)
        return 201, json.dumps({**event, "metadata": {**event["metadata"], "namespace": namespace}}).encode()

    def write_config_map(self, namespace: str, name: str | None, body: bytes) -> tuple[int, bytes]:
        """A ConfigMap created (`name` None) or updated, as the API server answers each."""
        verb = "create" if name is None else "update"
        if "configmaps@write" in self.snapshot.forbidden:
            message = (
                f'configmaps is forbidden: User "netqos-reader" cannot {verb} resource "configmaps" in API group "" '
                f'in the namespace "{namespace}"'
            )
            return 403, status_body(403, "Forbidden", message)
        obj = json.loads(body)
        name = name or obj["metadata"]["name"]
        with self.lock:
            key = f"{namespace}/{name}"
            if verb == "update" and key in self.snapshot.concurrent_writes and key not in self.concurrent_done:
                self.concurrent_done.add(key)
                self.written[(namespace, name)] = {**self.snapshot.concurrent_writes[key]}
            stored = self.written.get((namespace, name)) or self._stored("configmaps", namespace, name)
            version = (stored or {}).get("metadata", {}).get("resourceVersion")  # None: a snapshot's, as stored
            if verb == "create" and stored is not None:
                return 409, status_body(409, "AlreadyExists", f'configmaps "{name}" already exists')
            if verb == "update" and stored is None:
                return 404, status_body(404, "NotFound", f'configmaps "{name}" not found')
            if verb == "update" and obj.get("metadata", {}).get("resourceVersion") != version:
                message = (
                    f'Operation cannot be fulfilled on configmaps "{name}": the object has been modified; please '
                    "apply your changes to the latest version and try again"
                )
                return 409, status_body(409, "Conflict", message)
            meta = {**obj["metadata"], "namespace": namespace, "resourceVersion": str(int(version or 0) + 1)}
            self.written[(namespace, name)] = {**obj, "metadata": meta}
            return (201 if verb == "create" else 200), json.dumps(self.written[(namespace, name)]).encode()

    def _stored(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        found = next(
            (s for s in self.snapshot.objects.get(resource, []) if (s.namespace, s.name) == (namespace, name)), None
        )
        return None if found is None else dict(json.loads(found.body))

    def may_create_pods(self) -> bool:
        return self.snapshot.admit is not None and "pods/create" not in self.snapshot.forbidden

    def review(self, body: bytes) -> bytes:
        """A SelfSubjectAccessReview's answer: only creating pods may be allowed."""
        review = json.loads(body)
        attributes = (review.get("spec") or {}).get("resourceAttributes") or {}
        allowed = (attributes.get("verb"), attributes.get("resource")) == ("create", "pods") and self.may_create_pods()
        return json.dumps({**review, "status": {"allowed": allowed}}).encode()

    def dry_run(self, namespace: str, body: bytes, query: Mapping[str, list[str]]) -> tuple[int, bytes]:
        """A dry-run create of a pod: `Snapshot.admit`'s pod, named from its generateName."""
        if query.get("dryRun") != ["All"]:
            return 405, status_body(405, "MethodNotAllowed", "this server creates pods in dry run only")
        if self.snapshot.admit is None or not self.may_create_pods():
            message = (
                f'pods is forbidden: User "netqos-reader" cannot create resource "pods" in the namespace "{namespace}"'
            )
            return 403, status_body(403, "Forbidden", message)
        pod = json.loads(body)
        meta = pod.setdefault("metadata", {})
        meta.setdefault("name", f"{meta.get('generateName', '')}x7k2q")
        meta["namespace"] = namespace
        return 201, json.dumps(self.snapshot.admit(pod)).encode()

    def evict(self, namespace: str, name: str, request: Mapping[str, Any]) -> tuple[int, bytes]:
        """The Eviction API's answer for the pod, as the API server gives it; recorded."""
        with self.lock:
            code, body = self._eviction(namespace, name, request)
            self.evictions.append((namespace, name, code))
            return code, body

    def _eviction(self, namespace: str, name: str, request: Mapping[str, Any]) -> tuple[int, bytes]:
        if "pods/eviction" in self.snapshot.forbidden:
            return 403, status_body(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: User "netqos-reader" cannot create resource "pods/eviction" '
                f'in API group "" in the namespace "{namespace}"',
            )
        scripted = self.snapshot.eviction_answers.get(f"{namespace}/{name}")
        if scripted is not None:
            return scripted, status_body(scripted, "Scripted", f"scripted answer {scripted} for pod {namespace}/{name}")
        found = next(
            (s for s in self.snapshot.objects.get("pods", []) if (s.namespace, s.name) == (namespace, name)), None
        )
        if found is None or (namespace, name) in self.gone:
            return 404, status_body(404, "NotFound", f'pods "{name}" not found')
        pod = json.loads(found.body)
        uid = ((request.get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            return 409, status_body(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on Pod "{name}": Precondition failed: UID in precondition: {uid}, '
                f"UID in object meta: {pod['metadata'].get('uid')}",
            )
        budgets = [b for b in self.budgets if b.namespace == namespace and labels_match(b.selector, found.labels)]
        for budget in budgets:
            if budget.allowed <= 0:  # as pkg/registry/core/pod/storage/eviction.go answers (v1.36.3)
                cause = {
                    "type": "DisruptionBudget",
                    "message": f"The disruption budget {budget.name} needs more healthy pods than it has currently",
                }
                return 429, status_body(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    [cause],
                )
        for budget in budgets:
            budget.allowed -= 1
        self.gone.add((namespace, name))
        return 201, json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}).encode()


@dataclass
class _Budget:
    """A PodDisruptionBudget as the eviction check reads it."""

    namespace: str
    name: str
    selector: list[tuple[str, str, tuple[str, ...]]]
    allowed: int

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> _Budget:
        raw = (obj.get("spec") or {}).get("selector") or {}
        selector: list[tuple[str, str, tuple[str, ...]]] = [
            (str(k), "In", (str(v),)) for k, v in (raw.get("matchLabels") or {}).items()
        ]
        selector += [(e["key"], e["operator"], tuple(e.get("values") or ())) for e in raw.get("matchExpressions") or ()]
        allowed = (obj.get("status") or {}).get("disruptionsAllowed", 0)
        return cls(obj["metadata"].get("namespace", ""), obj["metadata"]["name"], selector, int(allowed))


@dataclass(frozen=True)
class Running:
    url: str
    kubeconfig: Path
    server: _Server

    @property
    def requests(self) -> list[str]:
        return list(self.server.requests)

    @property
    def connections(self) -> int:
        """The TCP connections the server accepted so far."""
        with self.server.lock:
            return self.server.connections

    @property
    def evictions(self) -> list[tuple[str, str, int]]:
        """(namespace, name, HTTP status) of every eviction asked for, in order."""
        with self.server.lock:
            return list(self.server.evictions)

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every Event created, in order."""
        with self.server.lock:
            return list(self.server.events)

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The ConfigMap as written, else as the snapshot holds it (None: neither)."""
        with self.server.lock:
            return self.server.written.get((namespace, name)) or self.server._stored("configmaps", namespace, name)


def write_kubeconfig(path: Path, url: str, namespace: str = "default") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": url}}],
        "users": [{"name": "netqos-reader", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "netqos-reader", "namespace": namespace}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def serve(snapshot: Snapshot, directory: Path) -> Iterator[Running]:
    """Serve `snapshot` on 127.0.0.1 until the block ends; `directory` receives the kubeconfig."""
    server = _Server(snapshot)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="kubeapi", daemon=True)
    thread.start()
    try:
        yield Running(url, write_kubeconfig(Path(directory) / "kubeconfig", url), server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# --- a scripted server: answers an API server rarely or never gives ------------------------------


@dataclass(frozen=True)
class Request:
    """One request a `ScriptedAPI` received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message  # case-insensitive, as HTTP header names are
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


# request -> (HTTP status, body: bytes as they are, anything else as JSON[, headers])
Answer = Callable[[Request], tuple[int, Any] | tuple[int, Any, dict[str, str]]]

ADMISSION_DISCOVERY = "/apis/admissionregistration.k8s.io/v1"


def admission_discovery() -> dict[str, Any]:
    """The APIResourceList a Kubernetes API server answers to GET /apis/admissionregistration.k8s.io/v1
    (its two webhook configuration resources; `register` reads it before anything else)."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "admissionregistration.k8s.io/v1",
        "resources": [
            {"name": name, "singularName": name[:-1], "namespaced": False, "kind": kind, "verbs": ["create", "patch"]}
            for name, kind in (
                ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration"),
                ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration"),
            )
        ],
    }


def discovering(answer: Answer) -> Answer:
    """`answer`, with the admission API's discovery answered as a Kubernetes API server does."""

    def answered(request: Request) -> tuple[int, Any] | tuple[int, Any, dict[str, str]]:
        if request.method == "GET" and request.path.rstrip("/") == ADMISSION_DISCOVERY:
            return 200, admission_discovery()
        return answer(request)

    return answered


class ScriptedAPI:
    """A loopback HTTP server that answers every request with `answer(request)` and records the
    requests: for what `serve`'s faithful snapshot never does (a 403 to everything, a page that is
    not JSON, a list that never ends) and for watching what the client sends (server-side apply).

    A context manager; `kubeconfig(directory)` points the real client at it."""

    def __init__(self, answer: Answer) -> None:
        self.requests: list[Request] = []
        recorded, respond = self.requests, answer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read their own output
                pass

            def _handle(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(self.command, url.path, parse_qs(url.query), self.headers, self.rfile.read(length))
                recorded.append(request)
                code, body, *more = respond(request)
                headers = {"Content-Type": "application/json", **(more[0] if more else {})}
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PATCH = do_POST = do_PUT = do_DELETE = _handle  # http.server's names

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def kubeconfig(self, directory: Path, namespace: str = "default") -> Path:
        return write_kubeconfig(Path(directory) / "kubeconfig", self.url, namespace)

    def __enter__(self) -> ScriptedAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


# --- building snapshots: the objects of an installed webhook, nodes and pods --------------------------

EPOCH = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class TLS:
    """PEM files of a CA (and its key) and a serving certificate it signed."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def issue_tls(
    names: Iterable[str], not_before: str = "2025-01-01", not_after: str = "2035-01-01", ca: TLS | None = None
) -> TLS:
    """A serving certificate for `names`, valid between the two dates (so tests can fix the clock),
    signed by the CA of `ca` when given, else by a new CA."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import NameOID

    def when(day: str) -> dt.datetime:
        return dt.datetime.fromisoformat(day).replace(tzinfo=dt.UTC)

    ca_key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    if ca is None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "netqos-test-ca")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(when("2024-01-01"))
            .not_valid_after(when("2036-01-01"))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
    else:
        ca_cert = x509.load_pem_x509_certificate(ca.ca_cert)
        loaded = serialization.load_pem_private_key(ca.ca_key, password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise TypeError(f"the CA key is {type(loaded).__name__}; the project makes ECDSA or RSA keys")
        ca_key = loaded
    key = ec.generate_private_key(ec.SECP256R1())
    names = list(names)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(when(not_before))
        .not_valid_after(when(not_after))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def pem(c: Any) -> bytes:
        return bytes(c.public_bytes(serialization.Encoding.PEM))

    def key_pem(k: Any) -> bytes:
        return bytes(
            k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )

    return TLS(pem(ca_cert), key_pem(ca_key), pem(cert), key_pem(key))


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{namespace or ''}-{name}", "creationTimestamp": EPOCH}
    if namespace:
        meta["namespace"] = namespace
    meta.update({k: v for k, v in extra.items() if v is not None})
    return meta


def namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(name, labels={"kubernetes.io/metadata.name": name}),
    }


def node(
    name: str, net: str | None = None, taints: Iterable[Mapping[str, str]] = (), unschedulable: bool = False
) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, **({"net": net} if net is not None else {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    # What every kubelet reports: a Node without status.allocatable fits no pod.
    status = {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": _meta(name, labels=labels), "spec": spec, "status": status}


def owner_ref(kind: str, name: str) -> dict[str, Any]:
    api_version = KINDS[RESOURCES[kind]][0]
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}", "controller": True}


def pod(
    ns: str,
    name: str,
    labels: Mapping[str, str] | None = None,
    node_name: str | None = None,
    owner: tuple[str, str] | None = None,
    created: str = EPOCH,
    preferred: list[Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    phase: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod as the API server returns it (`harness.pods.pod` and what the API server
    adds: uid, creationTimestamp, status); `preferred` is its preferred node affinity."""
    meta = _meta(
        name,
        ns,
        labels=dict(labels) if labels else None,
        annotations=dict(annotations) if annotations else None,
        ownerReferences=[owner_ref(*owner)] if owner else None,
    )
    meta["creationTimestamp"] = created
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    if node_name:  # bound when created, ready when running, as the kubelet reports it
        spec["nodeName"] = node_name
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
            {"type": "Ready", "status": "True" if status["phase"] == "Running" else "False"},
        ]
    containers = spec.pop("containers", [{"name": "app", "image": "registry.example/app:1"}])
    return pods.pod(name=None, meta=meta, containers=containers, preferred=preferred, status=status, **spec)


def workload(
    kind: str, ns: str, name: str, owner: tuple[str, str] | None = None, template: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A controller object with what owner lookups and rebalance read: its owner, its pod template."""
    api_version = KINDS[RESOURCES[kind]][0]
    meta = _meta(name, ns, ownerReferences=[owner_ref(*owner)] if owner else None)
    spec = {"template": json.loads(json.dumps(template))} if template is not None else {}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


def installation(
    webhook_configuration: Mapping[str, Any] | None,
    deployment: Mapping[str, Any],
    policy_yaml: str,
    tls: TLS | None,
    namespace_: str = "netqos-system",
    ready_endpoints: int = 2,
) -> list[dict[str, Any]]:
    """The objects of an installed webhook: its configuration (None: not registered), the
    Deployment (with `status.readyReplicas` = `ready_endpoints`), the policy ConfigMap it mounts,
    the Service's EndpointSlice and the TLS Secret (None: absent)."""
    ns = namespace_
    objs: list[dict[str, Any]] = []
    if webhook_configuration is not None:
        objs.append(dict(webhook_configuration))
    copied: dict[str, Any] = json.loads(json.dumps(deployment))
    copied["metadata"].update(namespace=ns, uid="uid-deployment", creationTimestamp=EPOCH)
    copied["status"] = {"replicas": 2, "readyReplicas": ready_endpoints}
    volumes = copied["spec"]["template"]["spec"]["volumes"]
    config_map = next(v["configMap"]["name"] for v in volumes if v.get("configMap"))
    objs.append(copied)
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta(config_map, ns),
            "data": {"policy.yaml": policy_yaml},
        }
    )
    endpoints = [{"addresses": [f"10.0.0.{i + 1}"], "conditions": {"ready": True}} for i in range(ready_endpoints)] + (
        [{"addresses": ["10.0.0.99"], "conditions": {"ready": False}}] if ready_endpoints < 2 else []
    )
    objs.append(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": _meta("netqos-webhook-abcde", ns, labels={"kubernetes.io/service-name": "netqos-webhook"}),
            "addressType": "IPv4",
            "endpoints": endpoints,
        }
    )
    if tls is not None:
        data = {
            "ca.crt": base64.b64encode(tls.ca_cert).decode(),
            "tls.crt": base64.b64encode(tls.cert).decode(),
            "tls.key": base64.b64encode(tls.key).decode(),
        }
        objs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": _meta("netqos-webhook-tls", ns),
                "type": "kubernetes.io/tls",
                "data": data,
            }
        )
    objs += [namespace(n) for n in ("default", "kube-system", ns)]
    return objs
