"""A clock that moves only when a test moves it, for code that takes `clock: Callable[[], float]`."""

from __future__ import annotations


class ManualClock:
    """Reads `now` (seconds); a test advances it by assigning or adding to `now`."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
