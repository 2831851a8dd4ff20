"""The documentation gate: every user document (README.md, docs/**/*.md, deploy/**/README.md)
reads as reference, not as a lab notebook, and every link in it leads somewhere.

- README.md is at most 200 lines;
- no line is over 200 characters, outside code blocks and tables;
- no run narration ("load average", "other jobs", "a first run", ...) outside docs/evidence/,
  where the dated records of measurement runs live;
- every relative link names an existing file, and every #anchor a heading of its target, by
  GitHub's slug rules;
- every record under docs/evidence/ starts with the fixed header: title and date, commit, date,
  machine, load, the exact command, duration.

Each rule is a function from a document's text to its problems, so that the gate itself is
tested on planted violations (tests/fixtures/docs/) as well as run over the repository.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures import REPO

README_MAX_LINES = 200
LINE_MAX_CHARS = 200
# Phrases that tell the story of one run (where, when, beside what) rather than what is true.
NARRATION = (
    "load average",
    "other jobs",
    "shared machine",
    "machine is shared",
    "machine was shared",
    "while it was shared",
    "a first run",
    "earlier session",
    "this session",
    "quiet machine",
    "quieter machine",
    "rebase of the working tree",
)
EVIDENCE = REPO / "docs" / "evidence"
FIXTURES = REPO / "tests" / "fixtures" / "docs"
# The header every record has, in this order, one "- FIELD...: value" line each (harness/evidence.py writes it).
HEADER_FIELDS = ("commit", "date", "machine", "load average", "command", "duration")

Problems = list[str]


# --- the parts of a document the rules look at ------------------------------------------------


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line outside fenced and indented code blocks."""
    fence: str | None = None
    in_indented = False
    previous_blank = True
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            previous_blank = False
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if line.startswith("    ") and (previous_blank or in_indented):
            in_indented = True
            continue
        if in_indented and not line.strip():
            continue  # a blank line inside an indented block: the block may go on
        in_indented = False
        previous_blank = not line.strip()
        yield number, line


def heading_slugs(text: str) -> set[str]:
    """The anchors GitHub gives the headings of `text`: lowercase, punctuation removed, spaces
    to hyphens, the second of a slug suffixed -1, the third -2; plus explicit `<a name|id=...>`."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        heading = re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading is None:
            continue
        slug = slug_of(heading.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    slugs.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return slugs


def slug_of(heading: str) -> str:
    """GitHub's slug of one heading's text: links read as their text, then every character that
    is not a letter, digit, underscore, hyphen or space dropped, spaces to hyphens."""
    rendered = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", rendered).replace(" ", "-")


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every inline link, image and link reference definition outside code."""
    for number, line in prose_lines(text):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.sub(r"`[^`]*`", "", line)):
            yield number, target
        definition = re.match(r"^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)", line)
        if definition is not None:
            yield number, definition.group(1)


# --- the rules: each takes a document's text and returns its problems --------------------------


def readme_too_long(text: str) -> Problems:
    lines = len(text.splitlines())
    return [f"{lines} lines, more than {README_MAX_LINES}"] if lines > README_MAX_LINES else []


def long_lines(text: str) -> Problems:
    return [
        f"line {number}: {len(line)} characters, more than {LINE_MAX_CHARS}"
        for number, line in prose_lines(text)
        if len(line) > LINE_MAX_CHARS and not line.lstrip().startswith("|")
    ]


def narration(text: str) -> Problems:
    return [
        f"line {number}: run narration {phrase!r}; move the run's account to a record under docs/evidence/"
        for number, line in enumerate(text.splitlines(), 1)
        for phrase in NARRATION
        if phrase in line.lower()
    ]


def broken_links(text: str, path: Path) -> Problems:
    """Relative links of the document at `path` whose file or heading does not exist."""
    problems: Problems = []
    for number, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"line {number}: {target}: no file {file_part}")
        elif anchor and linked.suffix == ".md":
            linked_text = text if linked == path else linked.read_text()
            if anchor not in heading_slugs(linked_text):
                problems.append(f"line {number}: {target}: no heading #{anchor} in {linked.name}")
    return problems


def evidence_header(text: str, name: str) -> Problems:
    """A record NAME-DATE.md opens "# TITLE, DATE" and then the fixed header fields, in order."""
    problems: Problems = []
    named = re.fullmatch(r"[a-z0-9][a-z0-9.-]*-(\d{4}-\d{2}-\d{2})\.md", name)  # kubernetes-1.34-DATE too
    if named is None:
        problems.append(f"{name}: not named NAME-YYYY-MM-DD.md")
    lines = text.splitlines()
    title = re.fullmatch(r"# .+, (\d{4}-\d{2}-\d{2})", lines[0] if lines else "")
    if title is None:
        problems.append("line 1: not '# TITLE, YYYY-MM-DD'")
    elif named is not None and title.group(1) != named.group(1):
        problems.append(f"line 1: dated {title.group(1)}, the file's name {named.group(1)}")
    header = lines[2 : lines.index("", 2)] if "" in lines[2:] else lines[2:]
    where = {
        field: next((n for n, line in enumerate(header) if line.startswith(f"- {field}")), None)
        for field in HEADER_FIELDS
    }
    problems.extend(f"header: no '- {field}...:' line" for field, n in where.items() if n is None)
    found = [(n, field) for field, n in where.items() if n is not None]
    if [field for _, field in sorted(found)] != [field for _, field in found]:
        problems.append(f"header: the fields are not in the order {', '.join(HEADER_FIELDS)}")
    return problems


# --- the gate over the repository -------------------------------------------------------------


def user_documents() -> list[Path]:
    docs = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "deploy").rglob("README.md"))]
    return [doc for doc in docs if EVIDENCE not in doc.parents]


def records() -> list[Path]:
    return sorted(EVIDENCE.glob("*.md"))


def label(path: Path) -> str:
    return str(path.relative_to(REPO))


@pytest.mark.parametrize("rule", [long_lines, narration], ids=["long-lines", "narration"])
@pytest.mark.parametrize("doc", user_documents(), ids=label)
def test_the_user_documents_keep_the_line_rules(doc: Path, rule: Callable[[str], Problems]) -> None:
    assert rule(doc.read_text()) == []


@pytest.mark.parametrize("doc", [*user_documents(), *records()], ids=label)
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    assert broken_links(doc.read_text(), doc) == []


def test_the_readme_fits_in_200_lines() -> None:
    assert readme_too_long((REPO / "README.md").read_text()) == []


@pytest.mark.parametrize("record", records(), ids=label)
def test_every_record_opens_with_the_fixed_header(record: Path) -> None:
    assert evidence_header(record.read_text(), record.name) == []


def test_there_are_records_to_check() -> None:
    assert records(), "docs/evidence/ holds no record"


# --- the gate on planted violations ------------------------------------------------------------


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def links_of(name: str) -> Callable[[str], Problems]:
    return lambda text: broken_links(text, FIXTURES / name)


def header_of(name: str) -> Callable[[str], Problems]:
    return lambda text: evidence_header(text, name)


NO_COMMAND = "record-without-command-2026-12-07.md"
# (fixture, rule, a problem the rule must report for it)
CAUGHT: list[tuple[str, Callable[[str], Problems], str]] = [
    ("readme-201-lines.md", readme_too_long, "201 lines, more than 200"),
    ("line-201-characters.md", long_lines, "line 3: 201 characters, more than 200"),
    (
        "narrated.md",
        narration,
        "line 3: run narration 'load average'; move the run's account to a record under docs/evidence/",
    ),
    (
        "narrated.md",
        narration,
        "line 5: run narration 'a first run'; move the run's account to a record under docs/evidence/",
    ),
    (
        "narrated.md",
        narration,
        "line 6: run narration 'other jobs'; move the run's account to a record under docs/evidence/",
    ),
    (
        "broken-anchor.md",
        links_of("broken-anchor.md"),
        "line 9: #no-such-heading: no heading #no-such-heading in broken-anchor.md",
    ),
    ("broken-anchor.md", links_of("broken-anchor.md"), "line 10: missing.md: no file missing.md"),
    ("broken-anchor.md", links_of("broken-anchor.md"), "line 11: clean.md#nowhere: no heading #nowhere in clean.md"),
    (
        "broken-anchor.md",
        links_of("broken-anchor.md"),
        "line 12: #a-heading-2: no heading #a-heading-2 in broken-anchor.md",
    ),
    ("broken-anchor.md", links_of("broken-anchor.md"), "line 15: missing-reference.md: no file missing-reference.md"),
    (NO_COMMAND, header_of(NO_COMMAND), "header: no '- command...:' line"),
    (NO_COMMAND, header_of("record.md"), "record.md: not named NAME-YYYY-MM-DD.md"),
    (NO_COMMAND, header_of("record-2026-12-08.md"), "line 1: dated 2026-12-07, the file's name 2026-12-08"),
    (
        "record-out-of-order-2026-12-07.md",
        header_of("record-out-of-order-2026-12-07.md"),
        "header: the fields are not in the order commit, date, machine, load average, command, duration",
    ),
]


@pytest.mark.parametrize(("name", "rule", "problem"), CAUGHT, ids=[problem for _, _, problem in CAUGHT])
def test_a_planted_violation_is_caught(name: str, rule: Callable[[str], Problems], problem: str) -> None:
    assert problem in rule(fixture(name))


def test_a_link_to_the_second_of_two_equal_headings_resolves() -> None:
    """Line 13 of broken-anchor.md links #a-heading-1 (the second "A heading") and #a-heading."""
    problems = broken_links(fixture("broken-anchor.md"), FIXTURES / "broken-anchor.md")
    assert [p for p in problems if p.startswith("line 13:")] == []


CLEAN_RULES: list[tuple[str, Callable[[str], Problems]]] = [
    ("readme", readme_too_long),
    ("long-lines", long_lines),
    ("narration", narration),
    ("links", lambda text: broken_links(text, FIXTURES / "clean.md")),
]


@pytest.mark.parametrize(("rule_name", "rule"), CLEAN_RULES, ids=[name for name, _ in CLEAN_RULES])
def test_a_clean_document_passes_every_rule(rule_name: str, rule: Callable[[str], Problems]) -> None:
    """Code blocks and tables may hold long lines; a heading's anchor counts punctuation out and
    numbers repeated headings; links to files and headings that exist pass."""
    assert rule(fixture("clean.md")) == []


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Checking a live cluster: `netqos-webhook status`", "checking-a-live-cluster-netqos-webhook-status"),
        (
            "gunicorn's C HTTP parser (gunicorn-h1c): measured, not adopted",
            "gunicorns-c-http-parser-gunicorn-h1c-measured-not-adopted",
        ),
        ("Hostile clients: deadlines, capacity, memory", "hostile-clients-deadlines-capacity-memory"),
        ("The Kubernetes 1.36.0–1.36.3 panic", "the-kubernetes-13601363-panic"),
        ("See [the policy](policy.md)", "see-the-policy"),
    ],
)
def test_a_headings_anchor_is_githubs_slug(heading: str, slug: str) -> None:
    assert slug_of(heading) == slug


def test_a_repeated_heading_gets_a_numbered_anchor() -> None:
    assert heading_slugs("# At scale\n\n## At scale\n\n### At scale\n") == {"at-scale", "at-scale-1", "at-scale-2"}


def test_a_heading_inside_a_code_block_is_no_anchor() -> None:
    assert heading_slugs("# Real\n\n```\n# kustomization.yaml\n```\n") == {"real"}


def test_a_clean_record_has_the_whole_header() -> None:
    assert evidence_header(fixture("evidence-clean-2026-12-07.md"), "evidence-clean-2026-12-07.md") == []
