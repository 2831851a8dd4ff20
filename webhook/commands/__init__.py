"""One module per `netqos-webhook` command, none importing another (an import contract says so).

Each command module holds its typed arguments (a frozen dataclass, `<Name>Args`), its flags
beside them (`add_command(subparsers)`, the flags several commands share from
`webhook.commands.flags`) and one entry point, `run(args, out) -> exit code`, which writes its
result to `out`. `webhook.cli` owns the root parser, dispatch, exit codes and signals. A command
module imports what it needs to run (gunicorn, cryptography, the kubernetes client) inside its
`run`, so `--help` for any command stays light. What two commands share lives beside them here
(flags, tables, clusterread: the one place they read a live cluster, plan), never in a command.
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
