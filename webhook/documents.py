"""Reading YAML or JSON documents from files (or `-` for stdin), as Kubernetes tools read them.

One reader for policy files, pods to review or explain, and node lists, so every command reports
an unreadable input the same way: the kind of file, its path, what is wrong, what to do.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml


class DocumentError(ValueError):
    """An input file that cannot be read or parsed."""


class _Loader(yaml.SafeLoader):
    """YAML as the API server reads it: timestamps stay strings, as they are in JSON (a datetime
    would neither compare equal to the JSON the API server sends nor encode back to JSON)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_documents(path: str | Path, what: str, error: type[Exception] = DocumentError) -> list[Any]:
    """The non-empty documents in `path` (`-` reads stdin); `what` names the file in messages."""
    text = _read_text(str(path), what, error)
    try:
        return [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.YAMLError as err:
        raise error(f"{what} file {path}: not valid YAML or JSON: {err}") from None


def read_document(path: str | Path, what: str, error: type[Exception] = DocumentError) -> Any:
    """The single document in `path`; None when the file is empty."""
    docs = read_documents(path, what, error)
    if len(docs) > 1:
        raise error(f"{what} file {path}: holds {len(docs)} YAML documents; put exactly one in it")
    return docs[0] if docs else None


def _read_text(path: str, what: str, error: type[Exception]) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        return Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise error(f"{what} file {path}: cannot read it ({err.strerror}); check the path") from None
    except UnicodeDecodeError as err:
        raise error(f"{what} file {path}: not UTF-8 text ({err.reason}); save it as UTF-8") from None
