"""Where the webhook's Deployment serves its policy from: its --config file, through the volume
mounted there, as the kubelet mounts it (pure). `webhook.commands.clusterread` reads the ConfigMap
it names: the policy `status` and `rebalance` judge the cluster by."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook import apidata


@dataclass(frozen=True)
class PolicyLocation:
    """Where the webhook's Deployment serves its policy from: the --config file, and the ConfigMap
    key the kubelet puts there, or why that file is not one status can read."""

    path: str  # the --config argument
    config_map: str | None = None  # None: the file is not a ConfigMap key
    key: str = ""
    elsewhere: str = ""  # when config_map is None: where the file comes from instead


def policy_location(deployment: Mapping[str, Any]) -> PolicyLocation | None:
    """Where the policy file the webhook's Deployment serves comes from (its --config argument,
    through the volume mounted there, as the kubelet mounts it), or None when it serves the
    built-in policy."""
    template = apidata.obj(apidata.obj(deployment, "spec", "spec"), "template", "spec.template")
    spec = apidata.obj(template, "spec", "spec.template.spec")
    volumes = {apidata.text(v, "name", "volumes[].name"): v for v in apidata.items(spec, "volumes", "volumes")}
    for container in apidata.items(spec, "containers", "containers"):
        path = _config_argument(container)
        if path is None:
            continue
        mounted = _mounted_file(container, path)
        if isinstance(mounted, str):
            return PolicyLocation(path, elsewhere=mounted)
        volume_name, file = mounted
        config_map = apidata.obj(volumes.get(volume_name, {}), "configMap", f"volumes[{volume_name}].configMap")
        if not config_map:
            kinds = sorted(k for k in volumes.get(volume_name, {}) if k != "name")
            what = f"a {kinds[0]} volume" if kinds else "a volume the pod does not define"
            return PolicyLocation(path, elsewhere=f"volume {volume_name} is {what}, not a ConfigMap")
        key = file
        for item in apidata.items(config_map, "items", "configMap.items"):
            if apidata.text(item, "path", "items[].path") == file:
                key = apidata.text(item, "key", "items[].key")
        return PolicyLocation(path, apidata.text(config_map, "name", "configMap.name"), key)
    return None


def _config_argument(container: Mapping[str, Any]) -> str | None:
    """The value of the container's last --config argument, None without one."""
    words = [*apidata.items(container, "command", "command"), *apidata.items(container, "args", "args")]
    path = None
    for i, word in enumerate(words):
        if word.startswith("--config="):
            path = word.split("=", 1)[1]
        elif word == "--config" and i + 1 < len(words):
            path = words[i + 1]
    return path


def _mounted_file(container: Mapping[str, Any], path: str) -> tuple[str, str] | str:
    """(volume name, path of the file inside the volume) for the file at `path`: the deepest
    mount holding it, as the kubelet stacks mounts. A mount with `subPath` puts that path of the
    volume at its mountPath, a single file when the argument is the mountPath itself. Otherwise
    (a str) where the file comes from instead."""
    best: Mapping[str, Any] | None = None
    for mount in apidata.items(container, "volumeMounts", "volumeMounts"):
        at = apidata.text(mount, "mountPath", "volumeMounts[].mountPath").rstrip("/")
        inside = path == at or path.startswith(f"{at}/")
        if inside and (best is None or len(at) > len(apidata.text(best, "mountPath", "mountPath").rstrip("/"))):
            best = mount
    if best is None:
        return "no volume is mounted there (a file of the image)"
    name = apidata.text(best, "name", "volumeMounts[].name")
    if apidata.text(best, "subPathExpr", "volumeMounts[].subPathExpr"):
        return f"volume {name} is mounted with subPathExpr, which only the kubelet expands"
    rest = path[len(apidata.text(best, "mountPath", "mountPath").rstrip("/")) :].strip("/")
    sub_path = apidata.text(best, "subPath", "volumeMounts[].subPath").strip("/")
    return name, "/".join(part for part in (sub_path, rest) if part)
