"""Real nodes for the control plane of `harness.controlplane`: kubelets and kube-proxy built
with it, containerd, runc and the CNI plugins from Debian, every address on this machine.

The layout of one cluster's nodes (slot k, one of `SLOTS`, chosen free under a lock):

- a network namespace `netqos-k` holds the cluster's node network: the CNI bridge `cni0`
  (10.B.0.1/17, B = 128 + k: one subnet for every pod of the cluster, each node allocating from
  its own /24 of it, 10.B.(i+1).0/24), kube-proxy's rules, and the node address 10.B.255.2;
- a veth pair joins it to the host: `nqh-k` holds 10.B.255.1, the address the API server
  advertises (the `kubernetes` Service's endpoint) and the kubelets connect to; an nftables table
  `netqos_k` on the host turns that address and the API server's port into 127.0.0.1 (where it
  listens), which `route_localnet` on that one link allows. The host routes the pod range and the
  Service range (10.B.128.0/24) into the namespace; nothing else is routed, there is no default
  route in the namespace and no masquerading, so nothing leaves the machine;
- each node is a kubelet with its own containerd (a kubelet stops every pod sandbox of its
  runtime that is not one of its own pods, so two kubelets cannot share one), both joined to the
  namespace (`nsenter --net`, so kubelet's volume mounts stay visible to containerd), with their
  state under `<cluster directory>/nodes/<node>`; the processes and the pods' cgroups live under
  the cgroup `/netqos-k` (kubelet's cgroupRoot `/netqos-k/<node>`, cgroupfs driver);
- one kube-proxy (iptables mode) serves the whole namespace: the nodes share it.

`teardown(directory)` undoes all of it from what `nodes/network.json` records, written before
anything is created, so it also cleans up after a crash (a killed `scripts/cluster up`): it kills
every process in the cluster's cgroups and network namespace (the nodes' mount namespaces and their
mounts end with them), unmounts what is mounted under the directory, deletes the namespace (its
bridge, rules and sysctls go with it), the host link (its routes and sysctl go with it), the
nftables table and the cgroups. No sysctl of the host's own interfaces or of the host as a whole
is changed.

What differs from a production node (docs/real-nodes.md): the machines are cgroup v1, so the
kubelet runs with `failCgroupV1: false`; containerd runs with `restrict_oom_score_adj` (root here
lacks CAP_SYS_RESOURCE); images are loaded into containerd (no registry), the pause image is
compiled from Kubernetes' own `build/pause/linux/pause.c`; the kubelet's API is authorised for any
client the cluster's CA signed (AlwaysAllow); nodes share one kernel and one node address.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

SLOTS = 64  # 10.128.0.0/16 ... 10.191.0.0/16
STATE = "nodes/network.json"
LOCK = Path("/run/lock/netqos-webhook-nodes.lock")
CGROUP_FS = Path("/sys/fs/cgroup")
CNI_BIN = Path("/usr/lib/cni")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CONTAINERD_NAMESPACE = "k8s.io"
# What the nodes need from Debian, and a file each package installs (to see whether it is there).
DEBIAN_PACKAGES = {
    "containerd": "/usr/bin/containerd",
    "runc": "/usr/sbin/runc",
    "containernetworking-plugins": "/usr/lib/cni/bridge",
    "iptables": "/usr/sbin/iptables",
    "nftables": "/usr/sbin/nft",
    "gcc": "/usr/bin/gcc",
    "libc6-dev": "/usr/lib/x86_64-linux-gnu/libc.a",
}
# The first nodes' names and labels: a fast node and a slow node for the policy to choose between;
# the nodes after them are `node-1`, `node-2`... without a `net` label (`node_names`).
NAMED_NODES = (("fast-1", {"net": "high"}), ("slow-1", {"net": "low"}))
# Where a kubelet writes whatever its flags say: the device-plugin registration socket and its
# checkpoint (`pluginapi.KubeletSocket`, a constant under /var/lib/kubelet/device-plugins:
# pkg/kubelet/cm/devicemanager/manager.go, NewManagerImpl) and the container-log links
# (`DefaultContainerLogsDir`, /var/log/containers: pkg/kubelet/kubelet.go). On one shared directory
# two kubelets starting together race for one socket (each removes the sockets it finds, then
# listens: "bind: address already in use") and share one checkpoint, and every node writes into the
# host's /var. So each node's mount namespace overlays these directories: the host's files stay
# readable, every write lands under the node's directory, and the host's are never touched.
PRIVATE_HOST_DIRS = ("/var/lib", "/var/log")
KUBELET_PORT_BASE = 20250
START_TIMEOUT = 120.0
STOP_TIMEOUT = 3.0  # before SIGKILL: a throwaway cluster's pods need no graceful shutdown


class NodesError(RuntimeError):
    """The nodes could not be set up, started or removed; the message says which part and why."""


# --- what this machine can do ----------------------------------------------------------------------


def unavailable_reason() -> str | None:
    """Why real nodes cannot run here (None when they can, after `ensure_packages`)."""
    if not os.path.exists("/proc/self/ns/net") or not hasattr(os, "geteuid"):
        return "real nodes need Linux"
    if os.geteuid() != 0:
        return "real nodes need root (network namespaces, cgroups, containerd); run as root"
    missing = [name for name, path in DEBIAN_PACKAGES.items() if not Path(path).exists()]
    if missing and shutil.which("apt-get") is None:
        return f"real nodes need the Debian packages {', '.join(missing)} and there is no apt-get to install them"
    for tool in ("ip", "nsenter", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"real nodes need `{tool}` (iproute2, util-linux)"
    if not (CGROUP_FS / "memory").is_dir() and not (CGROUP_FS / "cgroup.controllers").exists():
        return f"no cgroup filesystem at {CGROUP_FS}"
    return None


def ensure_packages(log: Callable[[str], None] = print) -> None:
    """Install the missing Debian packages (apt-get; idempotent: nothing happens when all are there)."""
    missing = [name for name, path in DEBIAN_PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    log(f"installing Debian packages for the nodes: {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
        result = subprocess.run(install, env=env, capture_output=True, text=True, timeout=1200)
        if result.returncode != 0:
            raise NodesError(f"apt-get install {' '.join(missing)} failed:\n{result.stderr[-2000:]}")


# --- the network -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Network:
    """One cluster's addresses, all derived from its slot (see the module docstring)."""

    slot: int

    @property
    def prefix(self) -> str:
        return f"10.{128 + self.slot}"

    @property
    def pod_cidr(self) -> str:
        return f"{self.prefix}.0.0/17"

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.0.1"

    @property
    def service_cidr(self) -> str:
        return f"{self.prefix}.128.0/24"

    @property
    def host_address(self) -> str:
        """On the host's end of the link: what the API server advertises and the kubelets dial."""
        return f"{self.prefix}.255.1"

    @property
    def node_address(self) -> str:
        """In the namespace: every node's InternalIP (the nodes share the namespace)."""
        return f"{self.prefix}.255.2"

    @property
    def namespace(self) -> str:
        return f"netqos-{self.slot}"

    @property
    def host_link(self) -> str:
        return f"nqh-{self.slot}"

    @property
    def table(self) -> str:
        return f"netqos_{self.slot}"

    @property
    def cgroup(self) -> str:
        return f"netqos-{self.slot}"

    def node_range(self, index: int) -> tuple[str, str]:
        """The first and last pod address node `index` (0-based) allocates: 10.B.(index+1).0/24."""
        return f"{self.prefix}.{index + 1}.1", f"{self.prefix}.{index + 1}.254"


def _run(*command: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise NodesError(f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def _slot_in_use(slot: int) -> bool:
    network = Network(slot)
    if Path(f"/run/netns/{network.namespace}").exists() or Path(f"/sys/class/net/{network.host_link}").exists():
        return True
    if (CGROUP_FS / "pids" / network.cgroup).exists():
        return True
    ours = ipaddress.ip_network(f"{network.prefix}.0.0/16")
    routes = json.loads(_run("ip", "-j", "route", "show", "table", "all").stdout or "[]")
    for route in routes:
        dst = route.get("dst", "")
        if dst and dst != "default":
            try:
                if ipaddress.ip_network(dst, strict=False).overlaps(ours):
                    return True
            except ValueError:
                continue
    return False


def allocate(directory: Path) -> Network:
    """A free slot for the cluster in `directory`, recorded there before anything is created."""
    state = directory / STATE
    state.parent.mkdir(parents=True, exist_ok=True)
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for slot in range(SLOTS):
            if not _slot_in_use(slot):
                network = Network(slot)
                state.write_text(json.dumps({"slot": slot, "nodes": []}))
                # claimed before the lock is released: the namespace is what the next caller sees
                _run("ip", "netns", "add", network.namespace)
                return network
    raise NodesError(f"all {SLOTS} node networks (10.128.0.0/10) are in use; 'scripts/cluster down' one")


def recorded(directory: Path) -> Network | None:
    try:
        return Network(int(json.loads((directory / STATE).read_text())["slot"]))
    except (OSError, ValueError, KeyError):
        return None


def _ns(network: Network, *command: str) -> subprocess.CompletedProcess[str]:
    return _run("ip", "netns", "exec", network.namespace, *command)


def create_network(network: Network, api_port: int) -> None:
    """The namespace, the link, the host's routes and its one DNAT rule (module docstring)."""
    ns, link = network.namespace, network.host_link
    _run("ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
    _run("ip", "addr", "add", f"{network.host_address}/30", "dev", link)
    _run("ip", "link", "set", link, "up")
    _run("ip", "-n", ns, "addr", "add", f"{network.node_address}/30", "dev", "eth0")
    _run("ip", "-n", ns, "link", "set", "eth0", "up")
    _run("ip", "-n", ns, "link", "set", "lo", "up")
    # The bridge is made here, not by the first CNI call, so the host route below has a next hop
    # that answers before any pod runs.
    _run("ip", "-n", ns, "link", "add", "cni0", "type", "bridge")
    _run("ip", "-n", ns, "addr", "add", f"{network.gateway}/17", "dev", "cni0")
    _run("ip", "-n", ns, "link", "set", "cni0", "up")
    for key in ("net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"):
        _ns(network, "sysctl", "-qw", f"{key}=1")  # the namespace's own: gone with it
    for cidr in (network.pod_cidr, network.service_cidr):
        _run("ip", "route", "add", cidr, "via", network.node_address, "dev", link)
    _run("sysctl", "-qw", f"net.ipv4.conf.{link}.route_localnet=1")  # this link's own: gone with it
    rules = (
        f"table ip {network.table} {{\n"
        "  chain prerouting {\n"
        "    type nat hook prerouting priority dstnat;\n"
        f'    iifname "{link}" ip daddr {network.host_address} tcp dport {api_port} dnat to 127.0.0.1:{api_port}\n'
        "  }\n"
        "}\n"
    )
    result = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise NodesError(f"nft: {result.stderr.strip()}")


# --- cgroups -----------------------------------------------------------------------------------------


def _hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies (cpu, memory, pids, ..., named ones, the hybrid v2 one), or the v2 root."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        return [CGROUP_FS]
    found = []
    for entry in sorted(CGROUP_FS.iterdir()):
        # the named and hybrid (`unified`) ones too: runc makes the containers' cgroups there as well
        if entry.is_dir() and not entry.is_symlink() and (entry / "cgroup.procs").exists():
            found.append(entry)
    return found


def _make_cgroup(relative: str) -> None:
    for hierarchy in _hierarchies():
        path = hierarchy
        for part in relative.strip("/").split("/"):
            parent, path = path, path / part
            if not path.exists():
                path.mkdir()
                for name in ("cpuset.cpus", "cpuset.mems"):  # a new cpuset starts empty in v1
                    if (parent / name).exists():
                        (path / name).write_text((parent / name).read_text())


def _cgroup_pids(relative: str) -> set[int]:
    pids: set[int] = set()
    for hierarchy in _hierarchies():
        root = hierarchy / relative.strip("/")
        if root.is_dir():
            for procs in root.rglob("cgroup.procs"):
                try:
                    pids.update(int(line) for line in procs.read_text().split())
                except OSError:
                    continue
    return pids


def _remove_cgroup(relative: str) -> list[str]:
    left = []
    for hierarchy in _hierarchies():
        root = hierarchy / relative.strip("/")
        if not root.is_dir():
            continue
        for path in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            try:
                path.rmdir()
            except OSError:
                left.append(str(path))
        try:
            root.rmdir()
        except OSError:
            left.append(str(root))
    return left


def _join_cgroup(relative: str) -> None:
    """In the child before exec: move this process into the cgroup in every hierarchy."""
    pid = str(os.getpid())
    for hierarchy in _hierarchies():
        (hierarchy / relative.strip("/") / "cgroup.procs").write_text(pid)


# --- the nodes ---------------------------------------------------------------------------------------


def node_names(count: int) -> list[tuple[str, dict[str, str]]]:
    """The names and labels of a cluster's `count` nodes: `NAMED_NODES` first, then `node-1`...
    unlabelled."""
    named = list(NAMED_NODES[:count])
    return named + [(f"node-{i + 1}", {}) for i in range(count - len(named))]


def node_dir(directory: Path, name: str) -> Path:
    return directory / "nodes" / name


def containerd_socket(directory: Path, name: str) -> Path:
    return node_dir(directory, name) / "containerd" / "containerd.sock"


def recorded_nodes(directory: Path) -> list[str]:
    try:
        names: list[str] = json.loads((directory / STATE).read_text())["nodes"]
        return names
    except (OSError, ValueError, KeyError):
        return []


def _containerd_config(directory: Path, name: str, index: int, network: Network) -> str:
    base = node_dir(directory, name)
    first, last = network.node_range(index)
    cni = {
        "cniVersion": "0.4.0",
        "name": "netqos",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                # the pods' default route ends in the namespace, which has none: it reaches the
                # host's end of the link (the API server) and nothing beyond the machine
                "isDefaultGateway": True,
                "ipMasq": False,  # nothing is masqueraded: every address is on this machine
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [
                            {
                                "subnet": network.pod_cidr,
                                "rangeStart": first,
                                "rangeEnd": last,
                                "gateway": network.gateway,
                            }
                        ]
                    ],
                    "dataDir": str(base / "cni-ipam"),
                },
            }
        ],
    }
    (base / "cni").mkdir(parents=True, exist_ok=True)
    (base / "cni" / "10-netqos.conflist").write_text(json.dumps(cni, indent=2))
    c = base / "containerd"
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{c / "root"}"
state = "{c / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{c / "containerd.sock"}"
[ttrpc]
  address = "{c / "containerd.sock.ttrpc"}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{c / "opt"}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # root here lacks CAP_SYS_RESOURCE: without this every sandbox fails to start
  restrict_oom_score_adj = true
  stream_server_address = "{network.node_address}"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{c / "runc"}"
[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{base / "cni"}"
"""


def _kubelet_config(
    directory: Path, name: str, network: Network, ca: Path, ports: tuple[int, int]
) -> dict[str, object]:
    base = node_dir(directory, name)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": network.node_address,
        "port": ports[0],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports[1],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},  # only holders of the cluster CA's certificates get in
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": f"/{network.cgroup}/{name}",
        "failCgroupV1": False,  # these machines are cgroup v1; a production node is v2
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{containerd_socket(directory, name)}",
        "podLogsDir": str(base / "pod-logs"),
        "resolvConf": "",
        "syncFrequency": "10s",  # mounted ConfigMaps and Secrets reach the pods within seconds
        "imageGCHighThresholdPercent": 100,  # the images are loaded, not pulled: never collect them
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "makeIPTablesUtilChains": True,
        "registerNode": True,
        "rotateCertificates": False,
        "serializeImagePulls": False,
        "maxPods": 110,
        "shutdownGracePeriod": "0s",
    }


def _kube_proxy_config(kubeconfig: Path, hostname: str) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": hostname,
        "mode": "iptables",
        "bindAddress": "0.0.0.0",
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # No global sysctl: the conntrack table and its timeouts stay as the host has them.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
    }


def _kubelet_ports(index: int) -> tuple[int, int]:
    """Node `index`'s kubelet API and healthz ports. They are bound in the cluster's own network
    namespace, so fixed ports serve every cluster; they sit below its ephemeral range (32768 up:
    containerd's stream server takes port 0 there) and clear of kube-proxy's 10249 and 10256. A port
    found free on the host said nothing about the namespace, and two picks could coincide."""
    return KUBELET_PORT_BASE + 2 * index, KUBELET_PORT_BASE + 2 * index + 1


@dataclass(frozen=True)
class NodeCredentials:
    """What the control plane gives the nodes: its CA, a kubeconfig per kubelet and kube-proxy's."""

    ca: Path
    kubelets: dict[str, Path]
    kube_proxy: Path


def _spawn(directory: Path, network: Network, log_name: str, cgroup: str, command: Sequence[str]) -> int:
    _make_cgroup(cgroup)
    log = directory / "logs" / f"{log_name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{network.namespace}", "--", *command],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=directory,
            start_new_session=True,
            preexec_fn=lambda: _join_cgroup(cgroup),  # only writes cgroup.procs before exec
        )
    return process.pid


def overlay_dir(directory: Path, name: str, host_dir: str) -> Path:
    """Where node `name`'s writes to `host_dir` (one of `PRIVATE_HOST_DIRS`) land."""
    return node_dir(directory, name) / "host" / host_dir.strip("/").replace("/", "-")


def in_own_mount_namespace(directory: Path, name: str, command: Sequence[str]) -> list[str]:
    """`command` run in a new mount namespace, private (nothing mounted in it reaches the host, and
    it ends with its last process), with `PRIVATE_HOST_DIRS` overlaid (see there); it execs, so the
    pid stays the command's and `/proc/<pid>/ns/mnt` names the namespace for the node's kubelet."""
    mounts = []
    for host_dir in PRIVATE_HOST_DIRS:
        layer = overlay_dir(directory, name, host_dir)
        (layer / "upper").mkdir(parents=True, exist_ok=True)
        (layer / "work").mkdir(parents=True, exist_ok=True)
        options = f"lowerdir={host_dir},upperdir={layer / 'upper'},workdir={layer / 'work'}"
        mounts.append(f"mount -t overlay netqos-node -o {shlex.quote(options)} {shlex.quote(host_dir)}")
    script = " && ".join([*mounts, 'exec "$@"'])
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *command]


def check_directory(directory: Path) -> None:
    """The overlays can be made for `directory`: it lies outside what they cover, and its path has
    none of the characters that separate overlayfs' mount options (`,`) and lower layers (`:`)."""
    root = directory.resolve()
    if any(c in str(root) for c in ",:"):
        raise NodesError(
            f"the cluster directory {root} has a ',' or ':' in its path, which overlayfs' mount options "
            "cannot hold; set NETQOS_CLUSTER_DIR to a path without them"
        )
    for host_dir in PRIVATE_HOST_DIRS:
        if root == Path(host_dir) or Path(host_dir) in root.parents:
            raise NodesError(
                f"the cluster directory {directory} is under {host_dir}, which every node overlays; "
                "set NETQOS_CLUSTER_DIR to a directory elsewhere (for example under /tmp)"
            )


def start(
    directory: Path,
    network: Network,
    bin_dir: Path,
    credentials: NodeCredentials,
    pause: Path,
) -> dict[str, int]:
    """containerd and a kubelet per node, one kube-proxy; returns their pids by name."""
    names = list(credentials.kubelets)
    state = json.loads((directory / STATE).read_text())
    state["nodes"] = names
    (directory / STATE).write_text(json.dumps(state))
    labels = dict(node_names(len(names)))
    check_directory(directory)
    pids: dict[str, int] = {}
    system = f"{network.cgroup}/system"
    for index, name in enumerate(names):
        base = node_dir(directory, name)
        (base / "containerd").mkdir(parents=True, exist_ok=True)
        config = base / "containerd" / "config.toml"
        config.write_text(_containerd_config(directory, name, index, network))
        containerd = in_own_mount_namespace(directory, name, ["containerd", "--config", str(config)])
        pids[f"containerd-{name}"] = _spawn(directory, network, f"containerd-{name}", system, containerd)
    for name in names:
        _wait_for(lambda n=name: containerd_socket(directory, n).exists(), f"containerd of {name}", directory)  # type: ignore[misc]
        import_image(directory, name, pause)
    for index, name in enumerate(names):
        base = node_dir(directory, name)
        ports = _kubelet_ports(index)
        config = base / "kubelet.json"
        config.write_text(json.dumps(_kubelet_config(directory, name, network, credentials.ca, ports), indent=2))
        _make_cgroup(f"{network.cgroup}/{name}")
        node_labels = ",".join(f"{k}={v}" for k, v in labels.get(name, {}).items())
        command = [
            "nsenter",
            f"--mount=/proc/{pids[f'containerd-{name}']}/ns/mnt",  # its containerd's: see there
            "--",
            str(bin_dir / "kubelet"),
            f"--config={config}",
            f"--kubeconfig={credentials.kubelets[name]}",
            f"--root-dir={base / 'kubelet'}",
            f"--cert-dir={base / 'kubelet' / 'pki'}",
            f"--hostname-override={name}",
            f"--node-ip={network.node_address}",
            *([f"--node-labels={node_labels}"] if node_labels else []),
        ]
        pids[f"kubelet-{name}"] = _spawn(directory, network, f"kubelet-{name}", system, command)
    proxy_config = directory / "nodes" / "kube-proxy.json"
    proxy_config.write_text(json.dumps(_kube_proxy_config(credentials.kube_proxy, names[0]), indent=2))
    pids["kube-proxy"] = _spawn(
        directory, network, "kube-proxy", system, [str(bin_dir / "kube-proxy"), f"--config={proxy_config}"]
    )
    return pids


def _wait_for(ready: Callable[[], bool], what: str, directory: Path, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.2)
    raise NodesError(f"{what} not ready within {timeout:.0f} s; logs in {directory / 'logs'}")


def ctr(directory: Path, name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """containerd's `ctr` against node `name`'s containerd, in the Kubernetes namespace."""
    return _run(
        "ctr", "--address", str(containerd_socket(directory, name)), "-n", CONTAINERD_NAMESPACE, *args, timeout=timeout
    )


def import_image(directory: Path, name: str, archive: Path) -> None:
    ctr(directory, name, "images", "import", str(archive))


# --- teardown ------------------------------------------------------------------------------------


def _processes_in(network: Network, directory: Path) -> set[int]:
    pids = _cgroup_pids(network.cgroup)
    listed = subprocess.run(["ip", "netns", "pids", network.namespace], capture_output=True, text=True)
    pids.update(int(p) for p in listed.stdout.split() if p.isdigit())
    marker = str((directory / "nodes").resolve()).encode() + b"/"  # not the control plane's processes
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
            except OSError:
                continue
    pids.discard(os.getpid())
    return pids


def _mounts_under(directory: Path) -> list[str]:
    root = str(directory.resolve())
    found = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            point = line.split()[4].replace("\\040", " ")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return sorted(found, key=len, reverse=True)


def teardown(directory: Path) -> list[str]:
    """Remove everything the nodes of the cluster in `directory` made (module docstring); returns
    what could not be removed (empty when all is gone). Safe to call when nothing is there."""
    network = recorded(directory)
    if network is None:
        return []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _processes_in(network, directory):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (STOP_TIMEOUT if sig == signal.SIGTERM else 5)
        while time.monotonic() < deadline and _processes_in(network, directory):
            time.sleep(0.1)
    for point in _mounts_under(directory):
        subprocess.run(["umount", "-l", point], capture_output=True)
    subprocess.run(["ip", "netns", "del", network.namespace], capture_output=True)
    subprocess.run(["ip", "link", "del", network.host_link], capture_output=True)
    subprocess.run(["nft", "delete", "table", "ip", network.table], capture_output=True)
    left = _remove_cgroup(network.cgroup)
    left += [f"process {pid}" for pid in _processes_in(network, directory)]
    left += [f"mount {m}" for m in _mounts_under(directory)]
    if Path(f"/run/netns/{network.namespace}").exists():
        left.append(f"network namespace {network.namespace}")
    if Path(f"/sys/class/net/{network.host_link}").exists():
        left.append(f"link {network.host_link}")
    if not left:
        (directory / STATE).unlink(missing_ok=True)
    return left


# --- the pause image -------------------------------------------------------------------------------


def build_pause(source: Path, out: Path) -> Path:
    """Kubernetes' pause (`build/pause/linux/pause.c` of the module the kubelet is built from),
    compiled statically as its Makefile does, into `out` (kept when already there)."""
    if not out.exists():
        version = PAUSE_IMAGE.rsplit(":", 1)[1]
        partial = out.with_suffix(".partial")
        _run("gcc", "-Os", "-Wall", "-Werror", "-static", f"-DVERSION=v{version}", "-o", str(partial), str(source))
        _run("strip", str(partial))
        partial.rename(out)
    return out


def pause_archive(binary: Path, out: Path) -> Path:
    """A one-layer image of `binary` as /pause (user 65535, as the released image), tagged
    `PAUSE_IMAGE`, written as a `docker save` archive that `ctr images import` reads."""
    if out.exists():
        return out
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tar.gettarinfo(str(binary), arcname="pause")
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        info.mode = 0o755
        with open(binary, "rb") as data:
            tar.addfile(info, data)
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "gcc -static build/pause/linux/pause.c"}],
        }
    ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [PAUSE_IMAGE], "Layers": ["layer/layer.tar"]}])
    partial = out.with_suffix(".partial")
    with tarfile.open(partial, mode="w") as archive:
        for arcname, payload in (
            (config_name, config),
            ("layer/layer.tar", layer_bytes),
            ("manifest.json", manifest.encode()),
        ):
            info = tarfile.TarInfo(arcname)
            info.size = len(payload)
            archive.addfile(info, io.BytesIO(payload))
    partial.rename(out)
    return out
