"""Text values of the wire contract (string, JSON object or JSON array) and their one canonical rendering; the
contract's date format."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

Text = str | dict[str, Any] | list[Any]


def render_text(value: Text | None) -> str:
    """Render a Text value as the string a model reads.

    Strings pass through unchanged (no trimming, no normalisation). Objects and arrays become compact JSON with
    their own key order kept, so the same structured value always renders to the same string.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def is_iso_date(text: str) -> bool:
    """`text` is a date written YYYY-MM-DD, as the contract's `release_date` (and a bench result's `date`) is;
    Python 3.11's fromisoformat alone also reads "20261207" and "2026-W49-1"."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text, re.ASCII):  # "2026-W49-3" is ten characters too
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True
