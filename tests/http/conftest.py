"""HTTP tests: the WSGI app in this process, through Flask's test client (no socket, no TLS).

Patches the app returns are still cross-checked with Go's JSON-patch where a test says so.
"""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from webhook.policy_file import default_policy
from webhook.serving.app import AppConfig, create_app


@pytest.fixture
def client() -> FlaskClient:
    """A client of the app with the built-in default policy and default limits."""
    return create_app(AppConfig(policy=default_policy())).test_client()
