"""User docs, code comments and benchmark scripts state what is true now: no issue numbers, no before/after dates.

History goes to CHANGELOG.md (which this test does not read) and to commit messages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.history import history_mentions

ROOT = Path(__file__).resolve().parents[2]
CHECKED = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "src" / "jevserve").rglob("*.py")),
    *sorted((ROOT / "benchmarks").rglob("*.py")),
]


@pytest.mark.parametrize("path", CHECKED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_issue_numbers_or_before_after_dates(path):
    found = [f"{path.relative_to(ROOT)}:{line}: {text}" for line, text in history_mentions(path)]
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


def test_the_check_reads_files_at_all():
    assert len(CHECKED) > 200
