"""Serve the Flask baseline (benchmarks/baseline_app.py) with exactly the gunicorn settings of
`netqos-webhook serve`: the settings come from `webhook.serving.server.ServeOptions`, the same object the
CLI builds, so the two servers can differ only in the application.

    python -m benchmarks.serve_baseline --bind 127.0.0.1:8443 --certfile tls.crt --keyfile tls.key
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.serving.server import ServeOptions


class BaselineServer(BaseApplication):
    def __init__(self, options: ServeOptions) -> None:
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for name, value in self.options.gunicorn_settings().items():
            self.cfg.set(name, value)

    def load(self) -> Any:
        from benchmarks.baseline_app import app

        return app


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bind", required=True)
    p.add_argument("--certfile", type=Path, required=True)
    p.add_argument("--keyfile", type=Path, required=True)
    args = p.parse_args(argv)
    # as `netqos-webhook serve` configures logging at its default level
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    BaselineServer(ServeOptions(certfile=args.certfile, keyfile=args.keyfile, bind=args.bind)).run()


if __name__ == "__main__":
    main()
