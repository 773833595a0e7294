"""JSON for the reports commands write (sim, cluster and loadgen summaries): standard JSON, which has no NaN; and
the one way append-only JSONL files are opened.

Python's json writes float('nan') as a bare NaN, which JavaScript's JSON.parse, jq and most other parsers reject, so
a report with an undefined number (a maximum over no requests, an interval over one draw) could not be read outside
Python. Undefined and infinite numbers are written as null; the report's prose says what a missing number means.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, TextIO


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSONL text, split at \\n only (a \\r before it dropped). str.splitlines also splits at
    U+2028, U+2029, U+0085 and other characters a JSON string may hold unescaped (Python's json.dumps with
    ensure_ascii=False writes them so): a prompt holding one tore its record in two."""
    return [line.removesuffix("\r") for line in text.split("\n")]


def finite_or_null(value: Any) -> Any:
    """`value` with every NaN and infinity, at any depth, replaced by None (numpy scalars become Python ones)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 1) == 0:  # numpy scalars
        return finite_or_null(value.item())
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """`json.dumps` of `value` as standard JSON: NaN and infinities as null, and a failure if any is left."""
    return json.dumps(finite_or_null(value), allow_nan=False, **kwargs)


def open_for_append(path: Path) -> TextIO:
    """`path` opened to append JSON lines to (UTF-8), after closing a torn last line that a killed writer left: the
    next line must start on a line of its own, or it is unreadable too. Every append-only JSONL file of jevserve
    (the sweeps' runs, the bench's answers, the gateway's decision log) is opened with this."""
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            torn = f.read(1) != b"\n"
        if torn:
            with path.open("a", encoding="utf-8") as f:
                f.write("\n")
    return path.open("a", encoding="utf-8")
