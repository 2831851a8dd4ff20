"""Every input file is read as the API server reads it, and every unreadable one says where."""

from __future__ import annotations

import pytest

from webhook.documents import DocumentError, read_documents


@pytest.mark.parametrize(
    "case, text, message",
    [
        (
            "a duplicate key (the API server's decoder refuses it)",
            "a: 1\na: 2\n",
            'line 2, column 1: mapping key "a" already defined at line 1',
        ),
        (
            "a duplicate key in a nested mapping",
            "metadata:\n  labels: {qos: x}\n  labels: {qos: y}\n",
            'line 3, column 3: mapping key "labels" already defined at line 2',
        ),
        ("a duplicate key in a JSON object", '{"x": 1, "x": 2}', 'mapping key "x" already defined at line 1'),
        ("a control character", "a: b\nc: \x07\n", "line 2, column 4: character U+0007 is not allowed in YAML"),
        ("an unclosed list", "a: [1\n", "line 2, column 1:"),
    ],
)
def test_an_unusable_document_is_refused_with_its_line_and_column(case, text, message, tmp_path):
    path = tmp_path / "in.yaml"
    path.write_text(text)
    with pytest.raises(DocumentError) as err:
        read_documents(path, "input")
    assert str(err.value).startswith(f"input file {path}: not valid YAML or JSON: "), case
    assert message in str(err.value), case
    assert "<unicode string>" not in str(err.value), case


def test_a_merge_key_is_not_a_duplicate(tmp_path):
    path = tmp_path / "in.yaml"
    path.write_text("base: &b {k: 1}\nitem:\n  <<: *b\n  k: 2\n")
    assert read_documents(path, "input") == [{"base": {"k": 1}, "item": {"k": 2}}]
