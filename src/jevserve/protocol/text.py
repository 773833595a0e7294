"""Text values of the wire contract (string, JSON object or JSON array) and their one canonical rendering."""

from __future__ import annotations

import json
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
