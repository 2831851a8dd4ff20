"""What the installed webhook serves, read from a cluster: the policy in force (its Deployment's
--config, the ConfigMap mounted there), for `status`, which judges by it, and `rebalance`, which
plans by it; and the one getter both use, which turns what RBAC forbids into `status.Unknown`.
"""

from __future__ import annotations

from typing import TypeVar, cast

from webhook import apidata, cluster, status
from webhook.names import DEFAULT_SERVICE
from webhook.policy import Policy
from webhook.policy_file import PolicyError, default_policy, policy_from_bytes

Obj = TypeVar("Obj", bound=status.ObjectJSON)


def get_object(
    reader: cluster.Reader, kind: str, shape: type[Obj], name: str, namespace: str | None = None
) -> status.Read[Obj]:
    """The object, None when it does not exist, or Unknown when RBAC forbids reading it; `shape`
    is the JSON the API server sends for `kind` (taken on trust: it decoded into Go types first)."""
    try:
        return cast(Obj | None, reader.get(kind, name, namespace))
    except cluster.Forbidden:
        where = f" in namespace {namespace}" if namespace else ""
        return status.Unknown(f"{kind} {name}{where}")


def policy_in_force(
    reader: cluster.Reader, ns: str, override: Policy | None, config: str | None
) -> tuple[Policy, str, str | None]:
    """The policy the webhook in namespace `ns` serves (or `override`), where it came from, and why
    the cluster's could not be used: what `status` judges by, for any command that asks. With
    `override`, nothing is read."""
    if override is not None:
        return override, str(config), None
    deployment = get_object(reader, "Deployment", status.DeploymentJSON, DEFAULT_SERVICE, ns)
    return policy_of(reader, deployment, ns, override, config)


def policy_of(
    reader: cluster.Reader,
    deployment: status.Read[status.DeploymentJSON],
    ns: str,
    override: Policy | None,
    config: str | None,
) -> tuple[Policy, str, str | None]:
    """The policy to judge by, where it came from, and why the cluster's could not be used."""
    if override is not None:
        return override, str(config), None
    builtin = "the built-in default policy"
    if deployment is None or isinstance(deployment, status.Unknown):
        return default_policy(), f"{builtin} (the webhook's Deployment could not be read)", None
    location = status.policy_location(deployment)
    if location is None:
        return default_policy(), builtin, None
    if location.config_map is None:
        why = f"the webhook's --config {location.path}: {location.elsewhere}"
        return default_policy(), f"{builtin} ({why}; pass --config FILE)", None
    name, key = location.config_map, location.key
    where = f"ConfigMap {ns}/{name} key {key}"
    config_map = get_object(reader, "ConfigMap", status.ConfigMapJSON, name, ns)
    if isinstance(config_map, status.Unknown) or config_map is None:
        what = "forbidden" if config_map is not None else "missing"
        return default_policy(), f"{builtin} ({where} {what}; pass --config FILE)", None
    text = apidata.string_map(config_map, "data", "data").get(key)
    if text is None:
        return default_policy(), builtin, f"{where} does not exist: the webhook cannot load its policy"
    try:
        return policy_from_bytes(text.encode(), where), where, None
    except PolicyError as err:
        return default_policy(), builtin, f"the webhook's policy is invalid: {err}"
