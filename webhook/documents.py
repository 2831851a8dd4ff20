"""Reading YAML or JSON documents from files (or `-` for stdin), as Kubernetes tools read them.

One reader for policy files, pods to review or explain, and node lists, so every command reports
an unreadable input the same way: the kind of file, its path, what is wrong, what to do. One rule
for `List` documents (`list_items`), so every command reads `kubectl get -o yaml` output alike.

A document nests at most `MAX_DEPTH` lists and mappings. The API server's decoders allow 10,000
levels (Go's encoding/json `maxNestingDepth`; go-yaml's `max_flow_level` and `max_indents`), far beyond what Python's
recursion limit lets PyYAML's composer, the printers and the JSON encoder go; a Kubernetes object
nests about a dozen levels (a Pod's deepest field, a node affinity term's values, is at 9; a
CRD's schema a few dozen). Deeper is refused while it is read, before it is built, with the
line and column where the limit was passed, so no reader fails later with a RecursionError.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from webhook.apidata import describe, show
from webhook.errors import UsageError

MAX_DEPTH = 200  # lists and mappings within each other, the document itself the first
# Bytes read from one file before it is refused, so /dev/zero or a huge file ends at once (the
# read stops one byte past the limit). A file of one object (a policy, a pod, a kubeconfig):
# the API server's limit for a request body, 3 MiB. A file of many objects (`review`'s input,
# `explain --nodes`, `kubectl get -o yaml` output), and all of `review`'s files together: 128 MiB.
OBJECT_LIMIT = 3 * 1024 * 1024
INPUT_LIMIT = 128 * 1024 * 1024


class DocumentError(UsageError, ValueError):
    """An input file that cannot be read or parsed."""


class _TooDeep(Exception):
    """The document nests more than MAX_DEPTH levels; `mark` is where the next level starts."""

    def __init__(self, mark: yaml.Mark | None) -> None:
        super().__init__(mark)
        self.mark = mark


class _Loader(yaml.SafeLoader):
    """YAML as the API server reads it: timestamps stay strings, as they are in JSON (a datetime
    would neither compare equal to the JSON the API server sends nor encode back to JSON); at
    most MAX_DEPTH levels deep (the composer is PyYAML's one recursive stage, so it is counted
    there; its parser and constructor keep their own stacks)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH and self.check_event(yaml.CollectionStartEvent):
                raise _TooDeep(self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    """A mapping whose keys are unique: the API server's decoders refuse a duplicate key (as
    `kubectl apply` does), where PyYAML would keep the last value silently."""
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: construct_mapping reports it
            break
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"mapping key {show(key)} already defined at line {first.start_mark.line + 1}",
                key_node.start_mark,
            )
        seen[key] = key_node
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    lambda loader, node: _construct_mapping(loader, node),  # type: ignore[arg-type]
)
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def read_bytes(
    path: str | Path,
    what: str,
    error: type[Exception] = DocumentError,
    limit: int = INPUT_LIMIT,
    beyond: str = "",
) -> bytes:
    """The content of `path` (`-` reads stdin), at most `limit` bytes: a longer one is refused
    once `limit` + 1 bytes are read. `what` names the file in messages; `beyond` says what to do
    about a file over the limit (by default: the limit's own reason)."""
    try:
        if str(path) == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(limit + 1)
    except OSError as err:
        raise error(f"{what} file {path}: cannot read it ({err.strerror}); check the path") from None
    if len(data) > limit:
        reason = beyond or (
            "the limit for a file of one object, as the API server's for a request body"
            if limit == OBJECT_LIMIT
            else "the limit for a file of objects; split it"
        )
        raise error(f"{what} file {path}: larger than {size(limit)}, {reason}")
    return data


def size(count: int) -> str:
    """Bytes as a person reads them: 3 MiB, 128 MiB, 1500 bytes."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= factor and count % factor == 0:
            return f"{count // factor} {unit}"
    return f"{count} bytes"


def directory_entries(path: str | Path, what: str, error: type[Exception] = DocumentError) -> list[Path]:
    """The entries of directory `path`, sorted (not recursive); the caller decides what to read."""
    try:
        with os.scandir(path) as entries:
            return sorted(Path(e.path) for e in entries)
    except OSError as err:
        raise error(f"{what} directory {path}: cannot list it ({err.strerror}); check its permissions") from None


def read_documents(
    path: str | Path, what: str, error: type[Exception] = DocumentError, limit: int = INPUT_LIMIT
) -> list[Any]:
    """The non-empty documents in `path` (`-` reads stdin), a file of at most `limit` bytes."""
    return documents_from_bytes(read_bytes(path, what, error, limit), path, what, error)


def documents_from_bytes(data: bytes, path: str | Path, what: str, error: type[Exception] = DocumentError) -> list[Any]:
    """The non-empty documents in `data`, the content of the file `path` already read."""
    return _parse(_decode(data, path, what, error), path, what, error)


def read_document(path: str | Path, what: str, error: type[Exception] = DocumentError) -> Any:
    """The single document in `path` (a file of one object: at most OBJECT_LIMIT bytes); None
    when the file is empty."""
    return document_from_bytes(read_bytes(path, what, error, OBJECT_LIMIT), path, what, error)


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
        raise error(f"{what} file {path}: not valid YAML or JSON: {_yaml_problem(err, text)}") from None
    except _TooDeep as err:
        where = f"at line {err.mark.line + 1}, column {err.mark.column + 1}" if err.mark is not None else ""
        raise error(
            f"{what} file {path}: lists and mappings nested more than {MAX_DEPTH} levels deep {where}, the limit "
            "of this reader (a Kubernetes object or a policy nests a few dozen at most); fix the file"
        ) from None


def _yaml_problem(err: yaml.YAMLError, text: str) -> str:
    """What PyYAML found and where (line and column), without its "<unicode string>" in place of
    the file name."""
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        context = f"{err.context} " if err.context else ""
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return f"{where}{context}{err.problem or ''}".rstrip()
    if isinstance(err, yaml.reader.ReaderError):
        # a character YAML does not allow (a control character, say): PyYAML gives an offset
        line = text.count("\n", 0, err.position) + 1
        column = err.position - (text.rfind("\n", 0, err.position) + 1) + 1
        char = f"U+{err.character:04X}" if isinstance(err.character, int) else repr(err.character)
        return f"line {line}, column {column}: character {char} is not allowed in YAML ({err.reason})"
    return str(err)


def _single(docs: list[Any], path: str | Path, what: str, error: type[Exception]) -> Any:
    if len(docs) > 1:
        raise error(f"{what} file {path}: holds {len(docs)} YAML documents; put exactly one in it")
    return docs[0] if docs else None


@dataclass(frozen=True)
class Place:
    """Where an object sits in a file: its document (numbered from 1 when the file holds several)
    and its index in each enclosing List's items."""

    document: int | None = None
    items: tuple[int, ...] = ()


def list_items(doc: Any, where: str, error: type[Exception] = DocumentError) -> list[Any] | None:
    """The items of a List document, or None when `doc` is not one.

    A List is what `kubectl get -o yaml` prints: `kind: List`, or a typed list such as `NodeList`
    or `PodList` (any kind ending in "List", as the API names its list types), holding its objects
    in `items` (absent or null: none). `where` starts the message of the error raised for `items`
    of another type ("nodes file F: document 2: ").
    """
    if not (isinstance(doc, dict) and isinstance(doc.get("kind"), str) and doc["kind"].endswith("List")):
        return None
    items = doc.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise error(f"{where}items must be a list of objects, got {describe(items)}")
    return items


def objects(
    docs: list[Any], where: Callable[[Place], str], error: type[Exception] = DocumentError
) -> Iterator[tuple[Place, Any]]:
    """Each object of `docs` with its place, the items of a List document (and of Lists in it)
    in place of the List; `where(place)` starts the message of `list_items`'s error."""
    for d, doc in enumerate(docs):
        yield from _flatten(doc, Place(d + 1 if len(docs) > 1 else None), where, error)


def _flatten(
    doc: Any, place: Place, where: Callable[[Place], str], error: type[Exception]
) -> Iterator[tuple[Place, Any]]:
    items = list_items(doc, where(place), error)
    if items is None:
        yield place, doc
        return
    for i, item in enumerate(items):
        yield from _flatten(item, dataclasses.replace(place, items=(*place.items, i)), where, error)
