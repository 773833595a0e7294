"""User docs and code state what is true now: no issue numbers, and no dates that mark a before and an after.

History (which issue asked for what, what a figure was before a change) belongs in CHANGELOG.md and the commit
messages. Narration in plain words ("was", "used to") cannot be told from a description by a pattern; review
catches that, this check catches what a pattern can.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

HISTORY = re.compile(
    r"\bissues?[ -]?#?\d+\b"  # "issue 13", "issue-13", "issues 6 and 13"
    r"|\b(?:before|until|since|as of|after)\s+20\d\d-\d\d-\d\d",  # "the default until 2026-12-01"
    re.IGNORECASE,
)


def history_mentions(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every issue number or before/after date in a file."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for match in HISTORY.finditer(line):
            yield number, match.group(0)
