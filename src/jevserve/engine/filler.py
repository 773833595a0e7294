"""The text the live engine streams: filler words that say what they are, one word per token."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

FILLER = ["[jevserve", "engine:", "simulated", "reply,", "filler", "text,", "not", "model", "output]"]


def filler_text(first: int, stop: int) -> str:
    """The words of tokens first .. stop - 1 of a reply (token i is word i of the filler, cycling), each followed
    by a space."""
    return "".join(FILLER[i % len(FILLER)] + " " for i in range(first, stop))


@dataclass(frozen=True, slots=True)
class StopPoint:
    """Where a stop string ends a reply of filler text."""

    num_tokens: int  # the token whose text completes the stop string: the reply's last
    num_chars: int  # the reply's text, cut before the stop string (or after it, when it is kept)


def stop_point(stops: Sequence[str], num_tokens: int, *, keep: bool = False, min_tokens: int = 0) -> StopPoint | None:
    """The first of `stops` to appear in the reply's text within its `num_tokens` tokens, as a model's server ends
    a reply on a stop string: generation ends with the token that completes it, and the text ends before it (after
    it with `keep`, vLLM's `include_stop_str_in_output`). As in vLLM, a stop string completed before the reply has
    `min_tokens` tokens is not checked for. None when no stop string ends the reply."""
    if not stops:
        return None
    # The text repeats every len(FILLER) tokens, so the first stop string to complete at or after min_tokens does
    # within one cycle plus the tokens the longest stop string can span (each token is at least 4 characters):
    # the search never builds a whole long reply's text on the event loop.
    window = min(num_tokens, max(min_tokens, 1) + len(FILLER) + max(len(s) for s in stops) // 4 + 2)
    text = filler_text(0, window)
    token_ends = list(itertools.accumulate(len(FILLER[i % len(FILLER)]) + 1 for i in range(window)))
    best: tuple[int, int, int] | None = None  # (tokens, start, end) of the first stop string to end the reply
    for stop in stops:
        at = text.find(stop)
        while at >= 0:
            end = at + len(stop)
            tokens = bisect.bisect_left(token_ends, end) + 1  # the token whose text holds the stop's last character
            if tokens >= max(min_tokens, 1):
                if best is None or (tokens, at) < best[:2]:
                    best = (tokens, at, end)
                break
            at = text.find(stop, at + 1)
    if best is None:
        return None
    tokens, at, end = best
    return StopPoint(tokens, end if keep else at)
