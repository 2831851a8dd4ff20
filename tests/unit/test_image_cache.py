"""The image's archive goes to the cache directory, made when missing: buildah's store (outside
the cache) may hold the base already, so the step that builds the base, and made the directory,
does not run after the cache was emptied."""

from __future__ import annotations

from harness import image


def test_the_archive_directory_is_made_when_the_cache_was_emptied(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "emptied"))
    archive = image.archive_path()
    assert archive.parent.is_dir()
    assert archive.parent == tmp_path / "emptied" / "netqos-webhook" / "images"
    assert archive.name == f"{image.IMAGE.replace(':', '-')}.tar"
