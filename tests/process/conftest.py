"""Process tests: real processes and real I/O. A real `netqos-webhook serve` (gunicorn, gevent,
TLS with the project's certificates, verified for the Service DNS name), the CLI run as users run
it, `kubectl patch --local` cross-checks, and API servers on loopback. Harness: harness.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.server import Server, start_server


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server with production defaults (2 workers, JSON logs), shared by a test module."""
    with start_server(tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])) as running:
        yield running
