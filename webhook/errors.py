"""One hierarchy for every failure the command line reports: the class carries its exit code.

A command raises; `webhook.cli` prints `netqos-webhook COMMAND: MESSAGE` on one line and exits
with `exit_code`, in one place. Exit codes are part of the interface (docs/commands.md, "Exit codes"):
0 success, 1 a failure at run time, 2 bad usage or unusable input, 3 problems found
(`review --fail-on`).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_RUNTIME = 1
EXIT_USAGE = 2
EXIT_FOUND = 3


class NetqosError(Exception):
    """A failure to report as one line on stderr; the message names what and what to do."""

    exit_code = EXIT_RUNTIME

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(NetqosError):
    """Bad usage or unusable input: a flag, a file that cannot be read or parsed, an invalid policy."""

    exit_code = EXIT_USAGE


class RuntimeFailure(NetqosError):
    """The command was right but something failed while doing it (a file that cannot be written)."""

    exit_code = EXIT_RUNTIME
