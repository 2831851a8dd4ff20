"""One module per `netqos-webhook` command: typed arguments in, an exit code out.

No argparse here: `webhook.cli` parses the command line, builds the command's arguments and maps
`webhook.errors.NetqosError` to exit codes. A command module imports what it needs (gunicorn,
cryptography, the kubernetes client) inside its `run`, so `--help` for any command stays light.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")


def typed(cls: type[T], source: object, **given: Any) -> T:
    """`cls` with each field read from the attribute of the same name of `source` (parsed flags,
    whose dest is the field's name, or another command's arguments), except the fields `given`;
    a field `source` has no attribute for keeps its default."""
    values = {
        f.name: getattr(source, f.name)
        for f in dataclasses.fields(cls)
        if f.name not in given and (hasattr(source, f.name) or f.default is f.default_factory is dataclasses.MISSING)
    }
    return cls(**values, **given)
