"""Instructions per call of the in-process review path, counted by valgrind (callgrind).

    python -m benchmarks.instructions [--pod typical|nonmatching|pod200] [--calls N] CASE...

Wall-clock timings on a shared 2-core machine move by 2x from one run to the next; instruction
counts do not (the same binary and input give the same count whatever else runs). Each CASE is
run twice under callgrind, with 0 and with N calls after a warm-up, and the difference divided
by N is the cost of one call, start-up excluded. User-space instructions only: the kernel's
share (sockets, TLS records on loopback) is not in these numbers.

Cases:
  baseline    the Flask baseline app, one WSGI call of POST /mutate
  app         our Flask app, one WSGI call of POST /mutate, review log line at INFO
  app-nolog   the same with the review log line off (level WARNING)
  app-json    the same with the review log line as `serve` writes it (JSON, webhook.serving.logs)
  http        gunicorn's HTTP/1.1 path around `app`: parse the request (gunicorn's parser:
              NETQOS_HTTP_PARSER=python|fast, `fast` is gunicorn-h1c), build the environ, call
              the app, write the response (to memory: no socket, no TLS)
  handle      admission.handle(policy, body): decode, policy, diff, encode
  decode      admission.decode(body)
"""

from __future__ import annotations

import argparse
import io
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("baseline", "app", "app-nolog", "app-json", "http", "handle", "decode")


def _workload(case: str, pod: str):
    from benchmarks.baseline_app import app as baseline
    from harness import reviews
    from webhook import admission
    from webhook.policy_file import default_policy
    from webhook.serving.app import AppConfig, create_app

    logging.basicConfig(
        level="INFO", stream=open("/dev/null", "w"), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    document, _ = reviews.scenarios()[pod]
    document = reviews.fresh(document)
    document["request"]["uid"] = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
    body = reviews.encode(document)
    policy = default_policy()
    ours = create_app(AppConfig(policy=policy))
    if case == "app-nolog":
        logging.getLogger("webhook.review").setLevel("WARNING")
    if case == "app-json":
        from webhook.serving import logs

        logs.configure("json", "info", open("/dev/null", "w"))

    def environ():
        return {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/mutate",
            "QUERY_STRING": "timeout=10s",
            "SERVER_NAME": "netqos-webhook.netqos-system.svc",
            "SERVER_PORT": "8443",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_HOST": "x",
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "https",
            "wsgi.errors": sys.stderr,
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }

    def start_response(status, headers, exc_info=None):
        if not status.startswith("200"):
            raise SystemExit(f"instructions: {case} answered {status}")

    http = _http_path(ours, body) if case == "http" else None

    return {
        "http": http,
        "baseline": lambda: b"".join(baseline(environ(), start_response)),
        "app": lambda: b"".join(ours(environ(), start_response)),
        "app-nolog": lambda: b"".join(ours(environ(), start_response)),
        "app-json": lambda: b"".join(ours(environ(), start_response)),
        "handle": lambda: admission.handle(policy, body),
        "decode": lambda: admission.decode(body),
    }[case]


def _http_path(app, body: bytes):
    """One request through gunicorn's parser, environ and response writer, as a worker does."""
    import os

    from gunicorn.config import Config
    from gunicorn.http.parser import RequestParser
    from gunicorn.http.wsgi import create

    cfg = Config()
    cfg.set("http_parser", os.environ.get("NETQOS_HTTP_PARSER", "python"))
    cfg.set("forwarded_allow_ips", "")
    request = (
        b"POST /mutate?timeout=10s HTTP/1.1\r\nHost: netqos-webhook.netqos-system.svc:443\r\n"
        b"User-Agent: kube-apiserver-admission\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, */*\r\nAccept-Encoding: gzip\r\n"
        b"Content-Length: %d\r\n\r\n" % len(body)
    ) + body

    class Sink:
        def sendall(self, data: bytes) -> None:
            pass

        send = sendall

    sink = Sink()

    def call() -> None:
        req = next(RequestParser(cfg, iter([request]), ("10.0.0.1", 40000)))
        resp, environ = create(req, sink, ("10.0.0.1", 40000), ("10.0.0.2", 8443), cfg)
        for item in app(environ, resp.start_response):
            resp.write(item)
        resp.close()

    return call


def _child(case: str, pod: str, calls: int) -> None:
    fn = _workload(case, pod)
    fn()
    fn()
    for _ in range(calls):
        fn()


def count(case: str, pod: str, calls: int) -> int:
    """Instructions per call of CASE, start-up and warm-up excluded."""
    totals = []
    for n in (0, calls):
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                sys.executable,
                "-m",
                "benchmarks.instructions",
                "--child",
                case,
                pod,
                str(n),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        match = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
        if not match:
            raise SystemExit(f"instructions: no callgrind total in:\n{done.stderr[-2000:]}")
        totals.append(int(match.group(1)))
    return (totals[1] - totals[0]) // calls


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[2], int(argv[3]))
        return 0
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("cases", nargs="+", choices=CASES, metavar="CASE")
    p.add_argument("--pod", default="typical", choices=("typical", "nonmatching", "pod200"))
    p.add_argument("--calls", type=int, default=None, help="calls per measurement (default 50; 5 for pod200)")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions: valgrind is not installed (Debian: apt-get install valgrind)")
    calls = args.calls or (5 if args.pod == "pod200" else 50)
    for case in args.cases:
        print(f"{case:10} {args.pod:12} {count(case, args.pod, calls):>12,} instructions/call", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
