"""What the kernel says about a server's processes, read from /proc (Linux only).

Every function reads one snapshot and returns; none waits.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

ESTABLISHED = "01"
LISTEN = "0A"


def children(pid: int) -> list[int]:
    """Live processes whose parent is `pid` (gunicorn's workers), sorted."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name in parentheses may hold spaces: the fields start after its ")"
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return sorted(found)


def memory_kib(pid: int, field: str = "VmRSS") -> int:
    """A memory field of process `pid`'s /proc status in KiB: its resident set size (`VmRSS`)
    by default, or its peak (`VmHWM`)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise ValueError(f"no {field} in /proc/{pid}/status")


def memory_mib(pid: int, field: str = "VmRSS") -> float:
    """`memory_kib` in MiB."""
    return memory_kib(pid, field) / 1024


def tcp_sockets() -> Iterator[tuple[int, int, str, str]]:
    """(local port, remote port, state, inode) of every TCP socket, from /proc/net/tcp{,6}
    (state `ESTABLISHED` or `LISTEN`, among others)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
            yield local, remote, fields[3], fields[9]


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds open (empty when it is gone)."""
    found: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(target[8:-1])
    return found


def client_ports(pid: int) -> set[int]:
    """Remote (client) ports of the TCP connections process `pid` holds: which worker serves whom."""
    inodes = socket_inodes(pid)
    return {remote for _, remote, state, inode in tcp_sockets() if inode in inodes and state == ESTABLISHED}


def pending_client_ports(port: int) -> set[int]:
    """Remote ports of connections to local `port` that the kernel has established but no process
    has accepted yet (inode 0: still in a listening socket's accept queue). With SO_REUSEPORT each
    worker has its own queue, and a worker that dies takes the connections in its queue with it."""
    return {
        remote
        for local, remote, state, inode in tcp_sockets()
        if local == port and state == ESTABLISHED and inode == "0"
    }
