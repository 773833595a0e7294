"""The text the live engine streams: filler words that say what they are, one word per token."""

from __future__ import annotations

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


def stop_point(stops: Sequence[str], num_tokens: int, *, keep: bool = False) -> StopPoint | None:
    """The first of `stops` to appear in the reply's text within its `num_tokens` tokens, as a model's server ends
    a reply on a stop string: generation ends with the token that completes it, and the text ends before it (after
    it with `keep`, vLLM's `include_stop_str_in_output`). None when no stop string appears."""
    if not stops:
        return None
    text = filler_text(0, num_tokens)
    found = [(text.find(s), s) for s in stops]
    found = [(at, s) for at, s in found if at >= 0]
    if not found:
        return None
    at, stop = min(found, key=lambda f: (f[0] + len(f[1]), f[0]))  # the first to be complete
    end, covered, token = at + len(stop), 0, 0
    while covered < end:
        covered += len(FILLER[token % len(FILLER)]) + 1
        token += 1
    return StopPoint(token, end if keep else at)
