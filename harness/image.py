"""The project's image, built from its Dockerfile on a machine without a registry, loaded into
the containerd of every real node of a cluster, and measured (`scripts/image`).

- the base: the Dockerfile's FROM (`python:<version>-slim-bookworm`) cannot be pulled here, so a
  stand-in is made from Debian packages: `mmdebstrap --variant=minbase` of bookworm with python3
  and pip, without the EXTERNALLY-MANAGED marker (the official python images have none, and the
  Dockerfile's `pip` relies on that), documentation, the perl command or apt lists (perl's
  libraries stay; the Dockerfile's runtime stage purges them); it is tagged with the Dockerfile's
  FROM, so the Dockerfile is built unchanged. Its Python is Debian's (3.11), not the official
  image's; the Dockerfile's stages, user, entrypoint and command are its own. `FROM scratch` and
  `FROM <stage>` need no base.
- the build: `buildah bud` of the unchanged Dockerfile (buildah reads the BuildKit `RUN --mount`
  and `COPY --from`, and never fetches the `# syntax=` frontend), with the machine's CA bundle
  mounted for pip's downloads, as a `docker save` archive in the cache;
- the load: `ctr images import` into each node's containerd, as `kind load docker-image` does;
- what it holds: `contents()` lists every path of its root filesystem and each file's bytes;
  `run_in()` runs a command in a container of it, as its user, on the host's network;
- the record: `scripts/image record` builds the Dockerfile of a revision (HEAD by default) and the
  working tree's, and writes docs/evidence/image-size-DATE.md: both sizes, where the bytes go,
  the bytecode each holds, what the commands' start-up imports cost in each, and how long `serve`
  takes to answer /readyz and `rebalance --help` to run.

`dockerfile()` reads what tests compare against the local build: FROM, USER, ENTRYPOINT, CMD.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from harness import evidence
from harness import nodes as realnodes
from harness.controlplane import default_directory
from webhook import __version__

REPO = Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"
IMAGE = f"netqos-webhook:{__version__}"  # deploy/base/deployment.yaml's image
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-pip")
# Not needed to run Python or pip; mmdebstrap's usrmerge step brings perl in.
BASE_PURGE = ("usrmerge", "libfile-find-rule-perl", "libnumber-compare-perl", "libtext-glob-perl", "perl")
TOOLS = {"buildah": "buildah", "mmdebstrap": "mmdebstrap"}  # command -> Debian package
BASE_LABEL = "io.netqos.base-recipe"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_TIMEOUT = 1800.0


class ImageError(RuntimeError):
    """The image could not be built or loaded; the message says which step and why."""


@dataclass(frozen=True)
class Dockerfile:
    """What the Dockerfile says about the image a user builds with `docker build`."""

    bases: tuple[str, ...]  # the images the stages start from: not `scratch`, not an earlier stage
    user: str | None
    entrypoint: list[str] | None
    cmd: list[str] | None


def dockerfile(path: Path = DOCKERFILE) -> Dockerfile:
    bases: list[str] = []
    stages = {"scratch"}  # Docker's empty image, and the stages named so far: nothing to pull
    user = None
    entrypoint = cmd = None
    for raw in _instructions(path.read_text()):
        word, _, rest = raw.partition(" ")
        word = word.upper()
        if word == "FROM":
            image, *alias = rest.split()
            if image not in stages:
                bases.append(image)
            if len(alias) == 2 and alias[0].upper() == "AS":
                stages.add(alias[1])
        elif word == "USER":
            user = rest.strip()
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    return Dockerfile(tuple(bases), user, entrypoint, cmd)


def _instructions(text: str) -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped (also between
    continuation lines, as Docker drops them)."""
    found, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        found.append(current + stripped)
        current = ""
    return found


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "netqos-webhook" / "images"


def archive_path(name: str = IMAGE) -> Path:
    """Where the image `name` is saved, its directory made: buildah's store may hold the base
    already (it outlives the cache), so the base step, which makes the directory too, may not run."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    return cache_dir() / f"{name.replace(':', '-')}.tar"


def _run(*command: str, timeout: float = BUILD_TIMEOUT, cwd: Path | None = None) -> str:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if result.returncode != 0:
        raise ImageError(f"{' '.join(command[:4])}... exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "building the image needs root (buildah, mmdebstrap)"
    missing = [pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None]
    if missing and shutil.which("apt-get") is None:
        return f"building the image needs the Debian packages {', '.join(missing)} and there is no apt-get"
    return None


def ensure_tools() -> None:
    missing = [pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None]
    if missing:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing]
        if subprocess.run(install, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
            _run(*install)


def _exists(name: str) -> bool:
    return subprocess.run(["buildah", "inspect", "--type", "image", name], capture_output=True).returncode == 0


def _recipe() -> str:
    return hashlib.sha256(json.dumps([SUITE, MIRROR, BASE_PACKAGES, BASE_PURGE]).encode()).hexdigest()[:12]


def is_local_base(tag: str) -> bool:
    """Is `tag` in buildah's store the stand-in this module makes (its label names the recipe)?"""
    if not _exists(_qualified(tag)):
        return False
    labels = json.loads(_run("buildah", "inspect", "--type", "image", _qualified(tag)))["OCIv1"]["config"]
    return bool((labels.get("Labels") or {}).get(BASE_LABEL) == _recipe())


def base(tag: str) -> float:
    """The stand-in for `tag` (the Dockerfile's FROM) in buildah's store; seconds it took (0: there)."""
    if is_local_base(tag):
        return 0.0
    label = f"{BASE_LABEL}={_recipe()}"
    started = time.monotonic()
    cache_dir().mkdir(parents=True, exist_ok=True)
    rootfs = cache_dir() / "base-rootfs.tar"
    hooks = [
        f'--customize-hook=chroot "$1" dpkg --purge --force-depends {" ".join(BASE_PURGE)}',
        '--customize-hook=rm -rf "$1"/usr/lib/python3*/EXTERNALLY-MANAGED "$1"/var/lib/apt/lists/* "$1"/var/cache/*',
    ]
    excludes = [f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "info", "locale")]
    _run(
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(BASE_PACKAGES)}",
        '--aptopt=Apt::Install-Recommends "false"',
        *excludes,
        *hooks,
        SUITE,
        str(rootfs),
        f"deb {MIRROR} {SUITE} main",
    )
    container = _run("buildah", "from", "scratch").strip()
    try:
        mount = _run("buildah", "mount", container).strip()
        _run("tar", "-C", mount, "-xf", str(rootfs))
        _run(
            "buildah",
            "config",
            "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "--env",
            "LANG=C.UTF-8",
            "--cmd",
            "python3",
            "--label",
            label,
            container,
        )
        _run("buildah", "commit", "-q", container, _qualified(tag))
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True)
        rootfs.unlink(missing_ok=True)
    return time.monotonic() - started


def _qualified(name: str) -> str:
    """The name as containerd and the kubelet spell it (docker.io/library/ for a bare name)."""
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name


@dataclass(frozen=True)
class Built:
    archive: Path
    size: int  # bytes: the archive, i.e. the image's layers uncompressed, as `docker save` writes them
    base_seconds: float
    build_seconds: float


def build(path: Path = DOCKERFILE, name: str = IMAGE, context: Path = REPO) -> Built:
    """The Dockerfile at `path` built into `name` (`context` is its context: by default the
    repository), saved as an archive in the cache."""
    ensure_tools()
    facts = dockerfile(path)
    base_seconds = sum(base(tag) for tag in sorted(set(facts.bases)))
    started = time.monotonic()
    _run(
        "buildah",
        "bud",
        "--isolation=chroot",
        "--pull-never",
        "--layers",
        f"--volume={CA_BUNDLE}:{CA_BUNDLE}:ro",  # the machine's CA bundle, for pip's downloads
        "-t",
        _qualified(name),
        "-f",
        str(path),
        str(context),
    )
    archive = archive_path(name)
    archive.unlink(missing_ok=True)
    _run("buildah", "push", "-q", _qualified(name), f"docker-archive:{archive}:{_qualified(name)}")
    return Built(archive, archive.stat().st_size, base_seconds, time.monotonic() - started)


def inspect(name: str = IMAGE) -> dict[str, object]:
    """The image's OCI config (User, Entrypoint, Cmd, ...), as buildah stored it."""
    config: dict[str, object] = json.loads(_run("buildah", "inspect", "--type", "image", _qualified(name)))
    return config


# --- what the image holds ----------------------------------------------------------------------


@contextmanager
def container(name: str = IMAGE) -> Iterator[str]:
    """A working container of the image `name` (never pulled), removed when the block ends."""
    made = _run("buildah", "from", "--pull-never", _qualified(name)).strip()
    try:
        yield made
    finally:
        subprocess.run(["buildah", "rm", made], capture_output=True)


@dataclass(frozen=True)
class Contents:
    """Every path in an image's root filesystem ("/usr/bin/python3", ...), the bytes of each
    regular file (hard links counted once, as a layer stores them once), and the flags word of
    each .pyc file's header (`PYC_UNCHECKED_HASH`, ...; PEP 552)."""

    paths: frozenset[str]
    sizes: dict[str, int]
    bytecode: dict[str, int] = field(default_factory=dict)

    @property
    def top_level(self) -> list[str]:
        return sorted({path.split("/")[1] for path in self.paths})

    @property
    def total(self) -> int:
        return sum(self.sizes.values())

    def parts(self) -> dict[str, int]:
        """Bytes by part (`part_of`), largest first."""
        found: dict[str, int] = {}
        for path, size in self.sizes.items():
            found[part_of(path)] = found.get(part_of(path), 0) + size
        return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))


# Directories whose entries are each a part of their own: Python's site directories, and the
# shared libraries' (one library, or one directory of them, per part).
COLLECTIONS = ("site-packages", "dist-packages", "x86_64-linux-gnu", "aarch64-linux-gnu")


def part_of(path: str) -> str:
    """What a file's bytes count towards: the entry of a collection it is in (a site directory's
    top-level package, ".../site-packages/kubernetes"; a library, "/usr/lib/x86_64-linux-gnu/gconv"),
    else its first three path components ("/usr/lib/python3.11")."""
    names = path.strip("/").split("/")
    for at, name in enumerate(names[:-1]):
        if name in COLLECTIONS:
            return "/" + "/".join(names[: at + 2])
    return "/" + "/".join(names[:3])


def contents(name: str = IMAGE) -> Contents:
    """What the image `name` holds, read from its root filesystem mounted by buildah."""
    with container(name) as made:
        root = Path(_run("buildah", "mount", made).strip())
        try:
            return _walk(root)
        finally:
            subprocess.run(["buildah", "umount", made], capture_output=True)


# A .pyc file's header: magic number, then a 32-bit little-endian flags word (PEP 552): 0 for a
# timestamp-based file, bit 0 for a hash-based one, bit 1 too when Python checks it against its source.
PYC_TIMESTAMP, PYC_UNCHECKED_HASH, PYC_CHECKED_HASH = 0b00, 0b01, 0b11


def pyc_flags(path: Path) -> int:
    with open(path, "rb") as pyc:
        return int.from_bytes(pyc.read(8)[4:8], "little")


def _walk(root: Path) -> Contents:
    paths: set[str] = set()
    sizes: dict[str, int] = {}
    bytecode: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    for directory, dirs, files in os.walk(root):
        for entry in (*dirs, *files):
            full = Path(directory) / entry
            path = "/" + full.relative_to(root).as_posix()
            paths.add(path)
            facts = full.lstat()
            if stat.S_ISREG(facts.st_mode) and (facts.st_dev, facts.st_ino) not in seen:
                seen.add((facts.st_dev, facts.st_ino))
                sizes[path] = facts.st_size
            if path.endswith(".pyc") and stat.S_ISREG(facts.st_mode):
                bytecode[path] = pyc_flags(full)
    return Contents(frozenset(paths), sizes, bytecode)


def run_in(
    name: str, *command: str, volumes: Sequence[tuple[Path, str]] = (), timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`command` in a container of the image `name`, as the image's user with its environment."""
    with container(name) as made:
        return subprocess.run(
            run_command(made, *command, volumes=volumes), capture_output=True, text=True, timeout=timeout
        )


def run_command(made: str, *command: str, volumes: Sequence[tuple[Path, str]] = ()) -> list[str]:
    """`buildah run` of `command` in the working container `made`: the image's user, environment
    and working directory, the host's network (chroot isolation), `volumes` (host, container)
    mounted read-only."""
    mounts = [f"--volume={host}:{inside}:ro" for host, inside in volumes]
    return ["buildah", "run", "--isolation=chroot", *mounts, made, "--", *command]


# --- the size record ---------------------------------------------------------------------------

RECORD_NAME = "image-size"
TOP = 20


def record(argv: Sequence[str], before: str = "HEAD", directory: Path | None = None) -> Path:
    """Build the image from the Dockerfile of revision `before` and from the working tree's (the
    same context: the working tree), and write docs/evidence/image-size-DATE.md: both sizes and
    where they go. `argv` is the command line, for the record's header."""
    started, load_before = time.monotonic(), evidence.load_average()
    old_name = f"netqos-webhook:before-{before.lower().replace('~', '-').replace('^', '-')}"
    with tempfile.TemporaryDirectory() as scratch:
        old_file = Path(scratch) / "Dockerfile"
        old_file.write_text(_run("git", "show", f"{before}:Dockerfile", cwd=REPO))
        old = build(old_file, old_name)
    new = build()
    old.archive.unlink(missing_ok=True)  # measured; the layers stay in buildah's store
    body = render_record(before, (old, contents(old_name)), (new, contents()))
    body += render_bytecode(before, contents(old_name), contents())
    body += render_imports(before, measure_imports(old_name))
    body += render_startup(before, measure_startup(old_name))
    return evidence.write(
        RECORD_NAME,
        "The image's size, before and after",
        " ".join(["scripts/image", *argv]),
        body,
        (load_before, evidence.load_average()),
        time.monotonic() - started,
        directory or evidence.EVIDENCE,
    )


KINDS = (
    "the product (the webhook package)",
    "Python packages beside it (its dependencies; pip, setuptools, wheel where installed)",
    "Python: the interpreter and its standard library",
    "the rest of the base: Debian's libraries and commands, dpkg's database",
)


def _by_kind(held: Contents) -> dict[str, int]:
    """The files' bytes by `KINDS`."""
    found = dict.fromkeys(KINDS, 0)
    for path, size in held.sizes.items():
        names = path.strip("/").split("/")
        if any(name in COLLECTIONS[:2] for name in names[:-1]):
            at = next(i for i, name in enumerate(names) if name in COLLECTIONS[:2])
            product = names[at + 1] == "webhook" or names[at + 1].startswith("netqos_webhook-")
            found[KINDS[0] if product else KINDS[1]] += size
        elif names[-1].startswith("libpython3") or any(name.startswith("python3") for name in names[:3]):
            found[KINDS[2]] += size
        else:
            found[KINDS[3]] += size
    return found


def _paragraph(text: str) -> str:
    return textwrap.fill(text, width=100, break_on_hyphens=False, break_long_words=False)


def render_record(before: str, old: tuple[Built, Contents], new: tuple[Built, Contents]) -> str:
    """The record's body: the two sizes, then each image's largest parts."""
    mb = 1e6
    lines = [
        _paragraph(
            f"The image `{IMAGE}` built by `scripts/image` (buildah, on the base it makes from Debian packages, "
            f"whose Python is Debian's 3.11; harness/image.py), from the Dockerfile of `{before}` and from the "
            "working tree's, with the working tree as the context of both. Size: the `docker save` archive "
            "(every layer, uncompressed); files: the bytes of the regular files in the root filesystem."
        ),
        "",
        "| Dockerfile | size (MB) | files (MB) | top-level contents |",
        "|---|---:|---:|---|",
    ]
    for label, (built, held) in ((f"`{before}`", old), ("working tree", new)):
        lines.append(f"| {label} | {built.size / mb:.1f} | {held.total / mb:.1f} | {' '.join(held.top_level)} |")
    lines += [
        "",
        f"The working tree's image is {new[0].size / old[0].size:.0%} of the size of `{before}`'s image.",
        "",
        "## Where the files' bytes go",
        "",
        "| | " + f"`{before}` (MB) | working tree (MB) |",
        "|---|---:|---:|",
    ]
    kinds = [_by_kind(old[1]), _by_kind(new[1])]
    lines += [f"| {kind} | {kinds[0].get(kind, 0) / mb:.1f} | {kinds[1].get(kind, 0) / mb:.1f} |" for kind in KINDS]
    for label, (_, held) in ((f"`{before}`", old), ("the working tree", new)):
        lines += ["", f"## The {TOP} largest parts, Dockerfile of {label}", "", "| part | MB |", "|---|---:|"]
        lines += [f"| {part} | {size / mb:.1f} |" for part, size in list(held.parts().items())[:TOP]]
    return "\n".join(lines) + "\n"


# What each command imports as it starts: what of it the image holds no bytecode for, every
# process compiles as it starts (none is written: the root filesystem is read-only in the pod).
STARTUP_IMPORTS = {
    "serve": ("webhook.cli", "webhook.serving.server", "webhook.serving.app", "gunicorn.workers.ggevent"),
    "rebalance": ("webhook.cli", "webhook.cluster", "kubernetes.client", "kubernetes.config"),
}
# Wall and CPU seconds: on a shared machine the CPU time is the steadier of the two.
IMPORT_PROBE = (
    "import time; wall, cpu = time.perf_counter(), time.process_time(); import {}; "
    "print(time.perf_counter() - wall, time.process_time() - cpu)"
)
IMPORT_RUNS = 3
Runs = list[tuple[float, float]]  # (wall, CPU) seconds of each run


def import_seconds(name: str, modules: Sequence[str]) -> tuple[float, float]:
    """The wall and CPU seconds `modules` take to import in a container of the image `name`."""
    done = run_in(name, "python3", "-c", IMPORT_PROBE.format(", ".join(modules)))
    if done.returncode != 0:
        raise ImageError(f"importing in {name} exited {done.returncode}: {done.stderr[-1000:]}")
    wall, cpu = done.stdout.split()[-2:]
    return float(wall), float(cpu)


def measure_imports(old_name: str) -> dict[str, tuple[Runs, Runs]]:
    """For each command, `IMPORT_RUNS` imports in the image `old_name` and in `IMAGE`, taken in
    turn, so that a change in the machine's load falls on both."""
    found: dict[str, tuple[Runs, Runs]] = {command: ([], []) for command in STARTUP_IMPORTS}
    for _ in range(IMPORT_RUNS):
        for command, modules in STARTUP_IMPORTS.items():
            found[command][0].append(import_seconds(old_name, modules))
            found[command][1].append(import_seconds(IMAGE, modules))
    return found


def render_imports(before: str, runs: dict[str, tuple[Runs, Runs]]) -> str:
    lines = [
        "",
        "## Start-up imports",
        "",
        _paragraph(
            f"The modules each command imports as it starts, imported in a container of the image ("
            f"{IMPORT_RUNS} containers of each, the two images in turn; the median), with the bytecode each "
            "image holds and none written (PYTHONDONTWRITEBYTECODE): what has none is compiled by each "
            "process as it imports it. Wall and CPU seconds of the importing process."
        ),
        "",
        f"| command | modules | `{before}` wall (s) | working tree wall (s) | `{before}` CPU (s) "
        "| working tree CPU (s) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for command, (old, new) in runs.items():
        walls = [_median([wall for wall, _ in r]) for r in (old, new)]
        cpus = [_median([cpu for _, cpu in r]) for r in (old, new)]
        lines.append(
            f"| {command} | {', '.join(STARTUP_IMPORTS[command])} | {walls[0]:.2f} | {walls[1]:.2f} "
            f"| {cpus[0]:.2f} | {cpus[1]:.2f} |"
        )
    return "\n".join([*lines, ""])


PYC_KINDS = {PYC_TIMESTAMP: "timestamp", PYC_UNCHECKED_HASH: "unchecked-hash", PYC_CHECKED_HASH: "checked-hash"}


def render_bytecode(before: str, old: Contents, new: Contents) -> str:
    """How much bytecode each image holds, by how Python checks it against its source."""
    lines = ["", "## Bytecode", "", f"| .pyc files | `{before}` | working tree |", "|---|---:|---:|"]
    for flags, kind in PYC_KINDS.items():
        counts = [sum(1 for f in held.bytecode.values() if f == flags) for held in (old, new)]
        lines.append(f"| {kind} (files) | {counts[0]} | {counts[1]} |")
    megabytes = [sum(held.sizes.get(path, 0) for path in held.bytecode) / 1e6 for held in (old, new)]
    lines.append(f"| all (MB) | {megabytes[0]:.1f} | {megabytes[1]:.1f} |")
    return "\n".join([*lines, ""])


# --- start-up: a new replica's readiness, the CronJob's command --------------------------------

STARTUP_RUNS = 3
READY_TIMEOUT = 120.0
POLICY = REPO / "deploy/base/policy.yaml"
STARTUP = {
    "serve: process start to /readyz answering 200 (1 worker)": "serve",
    "rebalance --help: process start to exit": "rebalance --help",
}


def _readable(directory: Path) -> Path:
    """`directory` and its files readable by the image's user, as a Secret's volume is."""
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


def serve_ready_seconds(name: str) -> float:
    """Seconds from starting `serve` (`buildah run` in a working container of the image `name`,
    one worker, the certificate and policy mounted where the Deployment mounts them) to its
    /readyz answering 200."""
    from harness.certs import make_certs
    from harness.server import Server, free_port

    with tempfile.TemporaryDirectory() as scratch, container(name) as made:
        certs = make_certs(Path(scratch) / "tls")
        port, log = free_port(), Path(scratch) / "serve.log"
        command = run_command(
            made,
            *("netqos-webhook", "serve", f"--bind=127.0.0.1:{port}", "--workers=1"),
            *("--certfile=/tls/tls.crt", "--keyfile=/tls/tls.key", "--config=/config/policy.yaml"),
            volumes=[(_readable(certs.directory), "/tls"), (POLICY.parent, "/config")],
        )
        with open(log, "wb") as out:
            started = time.monotonic()
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(process, port, certs, log)
        try:
            while time.monotonic() - started < READY_TIMEOUT:
                if process.poll() is not None:
                    raise ImageError(f"serve in {name} exited {process.returncode}: {server.log_tail()}")
                try:
                    if server.request("GET", "/readyz").status == 200:
                        return time.monotonic() - started
                except OSError:
                    pass
                time.sleep(0.02)
            raise ImageError(f"serve in {name} not ready within {READY_TIMEOUT:.0f} s: {server.log_tail()}")
        finally:
            server.stop()


def command_seconds(name: str, *command: str) -> float:
    """Seconds `command` takes in a working container of the image `name` (made beforehand)."""
    with container(name) as made:
        started = time.monotonic()
        done = subprocess.run(run_command(made, *command), capture_output=True, text=True, timeout=READY_TIMEOUT)
        seconds = time.monotonic() - started
    if done.returncode != 0:
        raise ImageError(f"{' '.join(command)} in {name} exited {done.returncode}: {done.stderr[-1000:]}")
    return seconds


def startup_seconds(name: str, how: str) -> float:
    """One run of a `STARTUP` measure in the image `name`."""
    return serve_ready_seconds(name) if how == "serve" else command_seconds(name, "netqos-webhook", *how.split())


def measure_startup(old_name: str, runs: int = STARTUP_RUNS) -> dict[str, tuple[list[float], list[float]]]:
    """`runs` of each `STARTUP` measure in the image `old_name` and in `IMAGE`, taken in turn."""
    found: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label in STARTUP}
    for _ in range(runs):
        for label, how in STARTUP.items():
            found[label][0].append(startup_seconds(old_name, how))
            found[label][1].append(startup_seconds(IMAGE, how))
    return found


def _median(runs: list[float]) -> float:
    return sorted(runs)[len(runs) // 2]


def render_startup(before: str, runs: dict[str, tuple[list[float], list[float]]]) -> str:
    lines = [
        "",
        "## Start-up",
        "",
        _paragraph(
            f"Wall time of {STARTUP_RUNS} runs of each command in a working container of each image (the two "
            "images in turn), made "
            "beforehand (`buildah run`, chroot isolation, the host's network: its own cost is in every run), "
            "as the image's user with its environment: the median, then each run."
        ),
        "",
        f"| measure | `{before}` (s) | working tree (s) |",
        "|---|---:|---:|",
    ]
    for label, (old, new) in runs.items():
        cells = [f"{_median(r):.2f} ({', '.join(f'{s:.2f}' for s in r)})" for r in (old, new)]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return "\n".join([*lines, ""])


def load(directory: Path, archive: Path) -> list[str]:
    """Import the archive into the containerd of each node of the cluster in `directory`."""
    names = realnodes.recorded_nodes(directory)
    if not names:
        raise ImageError(f"no real nodes in {directory}; start them with 'scripts/cluster up --nodes N'")
    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # each node's containerd unpacks its own copy
        list(pool.map(lambda name: realnodes.import_image(directory, name, archive), names))
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/image",
        description=(
            f"Build {IMAGE} from the Dockerfile (buildah, a base made from Debian packages: no registry needed) "
            "and load it into the containerd of each real node of the cluster in $NETQOS_CLUSTER_DIR. Root."
        ),
    )
    parser.add_argument(
        "command",
        choices=["build", "load", "record"],
        nargs="?",
        default="load",
        help="load: build, then load; record: build the Dockerfile of --before and the working tree's, and "
        "write their sizes to docs/evidence/image-size-DATE.md",
    )
    parser.add_argument("--before", default="HEAD", help="record: the revision whose Dockerfile is 'before'")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"scripts/image: {reason}", file=sys.stderr)
        return 1
    try:
        if args.command == "record":
            print(f"wrote {record(sys.argv[1:] if argv is None else argv, args.before)}", file=sys.stderr)
            return 0
        built = build()
        print(
            f"image {IMAGE}: {built.size / 1e6:.1f} MB (uncompressed), base {built.base_seconds:.1f} s, "
            f"build {built.build_seconds:.1f} s, archive {built.archive}",
            file=sys.stderr,
        )
        if args.command == "load":
            started = time.monotonic()
            names = load(default_directory(), built.archive)
            print(f"loaded into {', '.join(names)} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    except (ImageError, realnodes.NodesError) as err:
        print(f"scripts/image {args.command}: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
