"""The text the live engine streams: filler words that say what they are, one word per token."""

from __future__ import annotations

FILLER = ["[jevserve", "engine:", "simulated", "reply,", "filler", "text,", "not", "model", "output]"]


def filler_text(first: int, stop: int) -> str:
    """The words of tokens first .. stop - 1 of a reply (token i is word i of the filler, cycling), each followed
    by a space."""
    return "".join(FILLER[i % len(FILLER)] + " " for i in range(first, stop))
