#!/usr/bin/env bash
# The experiment of the NetQoS scheduler plugin, with netqos-webhook and the stock kube-scheduler instead of a
# custom scheduler plugin:
#
#   1. add a fake node (deploy/examples/fake-node.yaml), so the scheduler has two nodes to score;
#   2. label a real node net=low and the fake node net=high;
#   3. install and register the webhook (in the cluster, or served from this machine with --dev);
#   4. apply the experiment's test pod (qos=latency-sensitive, tolerating the fake node's taints);
#   5. show the node it was bound to and the node affinity the webhook injected.
#
# Expected, as with the NetQoS scheduler plugin: the pod is bound to fake-node-1 (net=high). It stays Pending there,
# because no kubelet runs behind a fake node; the binding is the point.
#
# It changes no node it did not create or label itself: it refuses a real node that already has a `net`
# label, and a node named fake-node-1 it did not create. The nodes it labels or creates carry the label
# netqos.io/demo, by which --cleanup finds them again (and only them).
#
# Usage: scripts/demo.sh [--context NAME] [--node NAME] [--dev [--url URL]] [--build] [--cleanup]
#   --context NAME  kubeconfig context (default: the current one), e.g. minikube or kind-kind
#   --node NAME     the real node to label net=low (default: the first node besides fake-node-1)
#   --dev           serve the webhook from this machine (out of cluster, like the NetQoS scheduler plugin's
#                   scheduler) and register it by URL; no image needed
#   --url URL       with --dev: how the API server reaches this machine
#                   (default https://host.minikube.internal:8443/mutate, minikube's name for the host);
#                   a loopback URL (127.0.0.1, localhost, [::1]) makes the server listen on loopback only
#   --build         in-cluster mode: docker build the image and load it into minikube or kind
#   --cleanup       undo everything the demo did (the nodes labelled netqos.io/demo only), then exit.
#                   A --dev server is stopped then, or as soon as a later step of the demo fails.
# Run it from anywhere; it works on the repository it lives in.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONTEXT=""
NODE=""
MODE="in-cluster"
URL="https://host.minikube.internal:8443/mutate"
BUILD=0
CLEANUP=0
FAKE_NODE="fake-node-1"
POD="qos-demo-pod"
NAMESPACE="netqos-system"
MARK="netqos.io/demo"  # on the nodes the demo created (=created) or labelled net=low (=labelled)
DEV_CERTS="$HERE/deploy/overlays/dev/certs"
DEV_LOG="${TMPDIR:-/tmp}/netqos-webhook-demo.log"
DEV_PID="${TMPDIR:-/tmp}/netqos-webhook-demo.pid"
# netqos-webhook: $NETQOS_WEBHOOK, else the repository's own .venv (scripts/run and scripts/test
# make it; $VENV as for scripts/venv), else the one on the PATH.
VENV_DIR="${VENV:-.venv}"
case "$VENV_DIR" in /*) ;; *) VENV_DIR="$HERE/$VENV_DIR" ;; esac
if [ -n "${NETQOS_WEBHOOK:-}" ]; then
  NETQOS="$NETQOS_WEBHOOK"
elif [ -x "$VENV_DIR/bin/netqos-webhook" ]; then
  NETQOS="$VENV_DIR/bin/netqos-webhook"
else
  NETQOS="netqos-webhook"
fi

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --context) [ $# -ge 2 ] || die "--context needs a name"; CONTEXT="$2"; shift 2 ;;
    --node) [ $# -ge 2 ] || die "--node needs a node name"; NODE="$2"; shift 2 ;;
    --dev) MODE="dev"; shift ;;
    --url) [ $# -ge 2 ] || die "--url needs a URL"; URL="$2"; shift 2 ;;
    --build) BUILD=1; shift ;;
    --cleanup) CLEANUP=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown option: $1" ;;
  esac
done

KUBECTL=(kubectl)
REGISTER_CONTEXT=()
if [ -n "$CONTEXT" ]; then
  KUBECTL+=(--context "$CONTEXT")
  REGISTER_CONTEXT=(--context "$CONTEXT")
fi

# --- prerequisites: say everything that is missing, at once ------------------------------------
missing=()
command -v kubectl >/dev/null 2>&1 || missing+=("kubectl: install it (https://kubernetes.io/docs/tasks/tools/)")
command -v "$NETQOS" >/dev/null 2>&1 \
  || missing+=("$NETQOS: neither in $VENV_DIR/bin nor on the PATH; run $HERE/scripts/venv (or pip install -e $HERE) or set NETQOS_WEBHOOK")
if [ "$MODE" = "in-cluster" ] && [ "$BUILD" = 1 ]; then
  command -v docker >/dev/null 2>&1 || missing+=("docker: needed by --build to build the image")
  command -v minikube >/dev/null 2>&1 || command -v kind >/dev/null 2>&1 \
    || missing+=("minikube or kind: needed by --build to load the image into the cluster")
fi
if [ "$MODE" = "dev" ] && [ "$CLEANUP" = 0 ]; then
  command -v curl >/dev/null 2>&1 || missing+=("curl: needed by --dev to wait for the local server")
fi
if [ ${#missing[@]} -gt 0 ]; then
  printf 'demo: missing prerequisites:\n' >&2
  printf '  - %s\n' "${missing[@]}" >&2
  exit 1
fi

if ! nodes="$("${KUBECTL[@]}" get nodes -o name --request-timeout=10s 2>&1)"; then
  die "cannot reach the cluster${CONTEXT:+ of context $CONTEXT}: ${nodes}
Start one first (minikube start, or kind create cluster) or pass --context."
fi
names="$(printf '%s\n' "$nodes" | sed -n 's|^node/||p')"
if [ -n "$NODE" ]; then
  printf '%s\n' "$names" | grep -qx -- "$NODE" || die "--node $NODE: the cluster has no such node"
  [ "$NODE" != "$FAKE_NODE" ] || die "--node $FAKE_NODE is the demo's fake node; name a real node"
  REAL_NODE="$NODE"
else
  REAL_NODE="$(printf '%s\n' "$names" | grep -vx "$FAKE_NODE" | head -n 1 || true)"
  [ -n "$REAL_NODE" ] || die "the cluster has no node besides $FAKE_NODE: the webhook's pods need a real one"
fi

# nodes whose name is on a line of $1 (output of `kubectl get nodes -l ... -o name`)
listed() { printf '%s\n' "$1" | grep -qx "node/$2"; }
nodes_with() { "${KUBECTL[@]}" get nodes -l "$1" -o name --request-timeout=10s; }

# The server this demo started: its pid file names it, and the process must still be that server
# (a pid left over from an earlier run may belong to another process by now).
stop_dev_server() {
  if [ -f "$DEV_PID" ]; then
    pid="$(cat "$DEV_PID")"
    # (gunicorn renames its master "gunicorn: master [netqos-webhook]" where setproctitle is installed)
    if ps -p "$pid" -o args= 2>/dev/null | grep -qE 'netqos-webhook.* serve |master \[netqos-webhook\]'; then
      kill "$pid" 2>/dev/null || true
      echo "stopped the local webhook (pid $pid)"
    fi
    rm -f "$DEV_PID"
  fi
}

if [ "$CLEANUP" = 1 ]; then
  say "Cleaning up"
  run "${KUBECTL[@]}" delete pod "$POD" --ignore-not-found --force --grace-period=0
  created="$(nodes_with "$MARK=created")"
  if [ -n "$created" ]; then
    run "${KUBECTL[@]}" delete nodes -l "$MARK=created"
  elif listed "$nodes" "$FAKE_NODE"; then
    echo "left node $FAKE_NODE alone: it lacks the label $MARK=created, so the demo did not create it"
  fi
  labelled="$(nodes_with "$MARK=labelled")"
  if [ -n "$labelled" ]; then
    run "${KUBECTL[@]}" label nodes -l "$MARK=labelled" net- "$MARK-"
  else
    echo "no node carries $MARK=labelled: no net label to remove"
  fi
  run "${KUBECTL[@]}" delete mutatingwebhookconfiguration netqos-webhook --ignore-not-found
  run "${KUBECTL[@]}" delete -k "$HERE/deploy/base" --ignore-not-found --wait=false
  stop_dev_server
  exit 0
fi

# Refuse, before changing anything, a node the demo would change without having made it so.
if listed "$nodes" "$FAKE_NODE" && ! listed "$(nodes_with "$MARK=created")" "$FAKE_NODE"; then
  die "node $FAKE_NODE exists and the demo did not create it (no label $MARK=created): the demo would
overwrite it and --cleanup delete it. Rename or remove it yourself if it is a leftover, then run the demo again."
fi
if listed "$(nodes_with "net,$MARK!=labelled")" "$REAL_NODE"; then
  current="$("${KUBECTL[@]}" get node "$REAL_NODE" -o jsonpath='{.metadata.labels.net}')"
  die "node $REAL_NODE already has the label net=$current, which the demo did not set: it would overwrite it and
--cleanup remove it. Choose a node without a net label with --node NAME, or remove the label yourself
(kubectl label node $REAL_NODE net-) if it is not in use."
fi

say "1. A second node to score: the experiment's fake node (no kubelet behind it)"
run "${KUBECTL[@]}" apply -f "$HERE/deploy/examples/fake-node.yaml"

say "2. Label the nodes as in the experiment (and mark them, for --cleanup)"
run "${KUBECTL[@]}" label node "$FAKE_NODE" net=high "$MARK=created" --overwrite
run "${KUBECTL[@]}" label node "$REAL_NODE" net=low "$MARK=labelled" --overwrite
run "${KUBECTL[@]}" get nodes -L net

if [ "$MODE" = "in-cluster" ]; then
  say "3. Install the webhook in the cluster and register it"
  if [ "$BUILD" = 1 ]; then
    version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$HERE/webhook/__init__.py")"
    run docker build -t "netqos-webhook:$version" "$HERE"
    current="${CONTEXT:-$(kubectl config current-context)}"
    case "$current" in
      kind-*) run kind load docker-image "netqos-webhook:$version" --name "${current#kind-}" ;;
      *) run minikube image load "netqos-webhook:$version" ${CONTEXT:+--profile "$CONTEXT"} ;;
    esac
  fi
  run "${KUBECTL[@]}" apply -k "$HERE/deploy/base"
  run "$NETQOS" register "${REGISTER_CONTEXT[@]}" --config "$HERE/deploy/base/policy.yaml" --certs "$HERE/certs"
  if ! run "${KUBECTL[@]}" -n "$NAMESPACE" rollout status deployment/netqos-webhook --timeout=180s; then
    "${KUBECTL[@]}" -n "$NAMESPACE" get pods -o wide >&2 || true
    die "the webhook's pods are not ready. If they show ErrImagePull or ImagePullBackOff, the image is
not in the cluster: run the demo again with --build (needs docker), or build and load it yourself
(see the Dockerfile). Or use --dev to serve the webhook from this machine."
  fi
else
  say "3. Serve the webhook from this machine and register it by URL (as the NetQoS scheduler plugin's scheduler was run)"
  host="$(printf '%s' "$URL" | sed -E 's|^https://\[?([^]/:]+)\]?.*|\1|')"
  port="$(printf '%s' "$URL" | sed -nE 's|^https://[^/]*:([0-9]+)/.*|\1|p')"
  case "$host" in
    127.0.0.1|localhost|::1) bind="127.0.0.1:${port:-443}" ;;  # the API server runs on this machine
    *) bind="0.0.0.0:${port:-443}" ;;
  esac
  run "$NETQOS" certs --out "$DEV_CERTS" --host "$host" --host 127.0.0.1 --force  # registered below with its CA
  stop_dev_server
  printf '$ %s\n' "$NETQOS serve --bind $bind ... > $DEV_LOG &"
  "$NETQOS" serve --bind "$bind" --certfile "$DEV_CERTS/tls.crt" --keyfile "$DEV_CERTS/tls.key" \
    --config "$HERE/deploy/base/policy.yaml" >"$DEV_LOG" 2>&1 &
  echo $! >"$DEV_PID"
  # From here on a failing step stops the server it started; on success it keeps serving the demo's pod.
  stop_on_failure() { if [ "$?" != 0 ]; then stop_dev_server; fi; }
  trap stop_on_failure EXIT
  for _ in $(seq 1 50); do
    curl -fsS --cacert "$DEV_CERTS/ca.crt" "https://127.0.0.1:${port:-443}/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -fsS --cacert "$DEV_CERTS/ca.crt" "https://127.0.0.1:${port:-443}/readyz" >/dev/null \
    || die "the local webhook did not start; see $DEV_LOG"
  run "$NETQOS" register "${REGISTER_CONTEXT[@]}" --url "$URL" --config "$HERE/deploy/base/policy.yaml" --certs "$DEV_CERTS"
  echo "(the webhook's log: $DEV_LOG; stop it with: scripts/demo.sh --cleanup)"
fi

say "4. Apply the experiment's test pod"
run "${KUBECTL[@]}" delete pod "$POD" --ignore-not-found --force --grace-period=0
run "${KUBECTL[@]}" apply -f "$HERE/deploy/examples/test-pod.yaml"

say "5. Where did the stock scheduler bind it?"
node=""
for _ in $(seq 1 60); do
  node="$("${KUBECTL[@]}" get pod "$POD" -o jsonpath='{.spec.nodeName}' 2>/dev/null || true)"
  [ -n "$node" ] && break
  sleep 1
done
run "${KUBECTL[@]}" get pod "$POD" -o wide
echo "injected rules: $("${KUBECTL[@]}" get pod "$POD" -o jsonpath='{.metadata.annotations.netqos\.io/injected}')"
echo "node affinity:"
"${KUBECTL[@]}" get pod "$POD" -o jsonpath='{.spec.affinity.nodeAffinity}' && echo
run "${KUBECTL[@]}" get events --field-selector "involvedObject.name=$POD,reason=Scheduled"

if [ "$node" = "$FAKE_NODE" ]; then
  say "As with the NetQoS scheduler plugin: $POD is bound to $FAKE_NODE (net=high), not $REAL_NODE (net=low)"
  echo "Undo with: scripts/demo.sh${CONTEXT:+ --context $CONTEXT} --cleanup"
else
  die "$POD was bound to '${node:-nothing yet}', not $FAKE_NODE. If the affinity above is empty the
webhook did not mutate it: check 'kubectl get mutatingwebhookconfiguration netqos-webhook -o yaml'
(a caBundle must be set) and the webhook's log."
fi
