"""Reading YAML or JSON documents from files (or `-` for stdin), as Kubernetes tools read them.

One reader for policy files, pods to review or explain, and node lists, so every command reports
an unreadable input the same way: the kind of file, its path, what is wrong, what to do.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from webhook.errors import UsageError


class DocumentError(UsageError, ValueError):
    """An input file that cannot be read or parsed."""


class _Loader(yaml.SafeLoader):
    """YAML as the API server reads it: timestamps stay strings, as they are in JSON (a datetime
    would neither compare equal to the JSON the API server sends nor encode back to JSON)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_bytes(path: str | Path, what: str, error: type[Exception] = DocumentError) -> bytes:
    """The content of `path` (`-` reads stdin); `what` names the file in messages."""
    try:
        if str(path) == "-":
            return sys.stdin.buffer.read()
        return Path(path).read_bytes()
    except OSError as err:
        raise error(f"{what} file {path}: cannot read it ({err.strerror}); check the path") from None


def read_documents(path: str | Path, what: str, error: type[Exception] = DocumentError) -> list[Any]:
    """The non-empty documents in `path` (`-` reads stdin)."""
    return _parse(_decode(read_bytes(path, what, error), path, what, error), path, what, error)


def read_document(path: str | Path, what: str, error: type[Exception] = DocumentError) -> Any:
    """The single document in `path`; None when the file is empty."""
    return document_from_bytes(read_bytes(path, what, error), path, what, error)


def document_from_bytes(data: bytes, path: str | Path, what: str, error: type[Exception] = DocumentError) -> Any:
    """The single document in `data`, the content of the file `path` already read (a watcher
    that hashes what it parses); errors read as `read_document`'s."""
    return _single(_parse(_decode(data, path, what, error), path, what, error), path, what, error)


def _decode(data: bytes, path: str | Path, what: str, error: type[Exception]) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise error(f"{what} file {path}: not UTF-8 text ({err.reason}); save it as UTF-8") from None


def _parse(text: str, path: str | Path, what: str, error: type[Exception]) -> list[Any]:
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as err:
        raise error(f"{what} file {path}: not valid YAML or JSON: {_yaml_problem(err)}") from None


def _yaml_problem(err: yaml.YAMLError) -> str:
    """What PyYAML found and where, without its "<unicode string>" in place of the file name."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        context = f"{err.context} " if err.context else ""
        return f"line {mark.line + 1}, column {mark.column + 1}: {context}{err.problem}".rstrip()
    return str(err)


def _single(docs: list[Any], path: str | Path, what: str, error: type[Exception]) -> Any:
    if len(docs) > 1:
        raise error(f"{what} file {path}: holds {len(docs)} YAML documents; put exactly one in it")
    return docs[0] if docs else None
