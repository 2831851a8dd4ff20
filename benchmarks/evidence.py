"""Dated run records under docs/evidence/: the writer lives in harness/evidence.py, where the test
harness (scripts/test --all-versions) writes its records too; the benchmarks use it from here."""

from __future__ import annotations

from harness.evidence import EVIDENCE, REPO, commit, write

__all__ = ["EVIDENCE", "REPO", "commit", "write"]
