"""How long one kept-alive connection is served before the server asks its client to open a new one.

The API server keeps its connections to a webhook alive and reuses them for as long as they work,
and a Service balances connections, not requests: replicas that become Ready after the
connections were opened get none of the load. So each connection gets a budget when it is
accepted: an age and a number of requests, each jittered (uniformly within +-`jitter` of its
value) so that the connections of one burst do not all end together. The request that finds the
budget spent is answered, with `Connection: close`, and the client's next request opens a new
connection, which the Service may send to any ready replica. The server never closes a connection
between two requests for this: a POST the client is writing as the connection closes would fail
(Go's transport retries only idempotent requests).

Pure: the clock and the random source are passed in (`webhook.serving.worker` uses them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from webhook.names import (
    DEFAULT_CONNECTION_JITTER,
    DEFAULT_MAX_CONNECTION_AGE,
    DEFAULT_MAX_CONNECTION_REQUESTS,
)


@dataclass(frozen=True)
class ConnectionLimits:
    """The limits as configured (`serve --max-connection-age`, `--max-connection-requests`,
    `--connection-jitter`); 0 turns a limit off."""

    max_age: float = DEFAULT_MAX_CONNECTION_AGE  # seconds
    max_requests: int = DEFAULT_MAX_CONNECTION_REQUESTS
    jitter: float = DEFAULT_CONNECTION_JITTER  # a fraction of each limit, from 0 to 1


@dataclass(frozen=True)
class Budget:
    """One connection's share: served until `deadline` (monotonic seconds; None: no age limit) or
    for `requests` requests (None: no count limit), whichever ends first."""

    deadline: float | None
    requests: int | None

    def spent(self, now: float, served: int) -> bool:
        """True when the request about to be answered, the `served`-th (counting it), is the last."""
        return (self.deadline is not None and now >= self.deadline) or (
            self.requests is not None and served >= self.requests
        )


def jittered(value: float, jitter: float, rng: random.Random) -> float:
    """`value` moved uniformly within +-`jitter` of itself (jitter a fraction from 0 to 1)."""
    return value * (1.0 + rng.uniform(-jitter, jitter))


def budget(limits: ConnectionLimits, accepted_at: float, rng: random.Random) -> Budget:
    """The budget of a connection accepted at `accepted_at`. A count limit is at least one
    request: every connection answers the request it was opened for."""
    deadline = accepted_at + jittered(limits.max_age, limits.jitter, rng) if limits.max_age > 0 else None
    requests = max(1, round(jittered(limits.max_requests, limits.jitter, rng))) if limits.max_requests > 0 else None
    return Budget(deadline, requests)
