"""A key repeated within one JSON object. Python's json (and pydantic) keep the last of them without a word, so every
reader that must not lose a question, an option or a task to a repeat finds it with this, in `object_pairs_hook`."""

from __future__ import annotations

from typing import Any


def first_repeated_key(pairs: list[tuple[str, Any]]) -> str | None:
    """The first key of an object's `pairs` that appeared before in them, or None when each appears once."""
    if len({key for key, _ in pairs}) == len(pairs):
        return None  # the common case: one set, no loop in Python
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None  # unreachable: the counts differ only when a key repeats
