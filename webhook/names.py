"""Names and defaults shared by more than one module: one place to read or change each.

Only constants live here (strings, numbers, tuples): importing this module
imports nothing else of the project, so every layer can use it.
"""

from __future__ import annotations

from pathlib import Path

# --- the installation ----------------------------------------------------------------------------
DEFAULT_SERVICE = "netqos-webhook"  # the Service the API server calls, and the certificates' first name
DEFAULT_NAMESPACE = "netqos-system"
TLS_SECRET = "netqos-webhook-tls"  # kubernetes.io/tls Secret mounted by the Deployment at /tls
CONFIGURATION_NAME = "netqos-webhook"  # the MutatingWebhookConfiguration
REBALANCE_HISTORY = "netqos-rebalance-history"  # the ConfigMap of the evictions `rebalance --apply` made
FIELD_MANAGER = "netqos-webhook"  # server-side apply owner of what `register` sends
WEBHOOK_DOMAIN = "netqos.io"  # webhook entries are named <rule>.netqos.io
LABELS = {"app.kubernetes.io/name": "netqos-webhook", "app.kubernetes.io/component": "webhook"}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace since Kubernetes 1.21
ADMISSION_API_VERSION = "admissionregistration.k8s.io/v1"  # webhook configurations, admission policies

# --- pods ----------------------------------------------------------------------------------------
OPT_OUT_ANNOTATION = "netqos.io/inject"  # exactly "false" skips every rule
INJECTED_ANNOTATION = "netqos.io/injected"  # comma-separated names of the rules applied

# --- files and the environment -------------------------------------------------------------------
CONFIG_ENV = "NETQOS_CONFIG"  # the policy file when --config is not given
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
DEV_CERT_DIR = Path("certs")  # serve's development certificates and register's default
DEV_HOSTS = ("localhost", "127.0.0.1", "::1")

# --- certificates --------------------------------------------------------------------------------
DEFAULT_CA_DAYS = 3650  # every CA we make: outlives many server certificates, so renewals keep the caBundle
DEFAULT_CERT_DAYS = 365
# A certificate with fewer days left is due: `certs --renew-before 30` renews it; register and
# status warn about it.
RENEWAL_DAYS = 30
KEY_TYPES = ("ecdsa", "rsa")

# --- serving -------------------------------------------------------------------------------------
DEFAULT_BIND = "127.0.0.1:8443"
DEFAULT_WORKERS = 2
DEFAULT_KEEPALIVE_SECONDS = 120  # > the API server's 90 s idle-connection timeout
# A kept-alive connection is answered with `Connection: close` once it is this old or has served
# this many requests, each jittered by this fraction (webhook.serving.keepalive): the API server's
# next connection may then reach a replica that became Ready since. 0 turns a limit off.
DEFAULT_MAX_CONNECTION_AGE = 60.0
DEFAULT_MAX_CONNECTION_REQUESTS = 1000
DEFAULT_CONNECTION_JITTER = 0.2
WORKER_CLASSES = ("gevent", "gthread", "sync")
# The API server's own limit for a request body (3 MiB); a Pod in etcd is at most ~1.5 MiB.
DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024
# Request-body bytes one worker holds at once (docs/operations.md, "Hostile clients").
DEFAULT_BODY_BUDGET_BYTES = 16 * 1024 * 1024
# Deadlines per stage of a connection (webhook.serving.worker). The API server completes each in
# milliseconds and gives up on a call after the webhook's timeoutSeconds (10 s shipped, at most 30).
# The handshake's deadline runs from accept and so includes waiting for a core: it is the
# registration's timeout, so a starved worker never closes a connection the API server still waits on.
DEFAULT_HANDSHAKE_TIMEOUT = 10.0
DEFAULT_HEADER_TIMEOUT = 5.0
DEFAULT_BODY_TIMEOUT = 10.0
LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")

# --- kube-scheduler ------------------------------------------------------------------------------
MAX_NODE_SCORE = 100  # framework.MaxNodeScore: a Score plugin's normalised range, and the NetQoS plugin's top
DEFAULT_SCHEDULER = "default-scheduler"  # a pod's spec.schedulerName when it names none
DEFAULT_NODE_AFFINITY_WEIGHT = 2  # NodeAffinity's Score weight in the default profile (default_plugins.go)
DEFAULT_NETQOS_WEIGHT = 1  # the NetQoS plugin's Score weight when a profile enables it without one
