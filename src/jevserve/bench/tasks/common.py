"""Helpers the task modules share: items from labelled records, and benign ShareGPT negatives matched in length."""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from jevserve.bench.data import cap_order
from jevserve.bench.sharegpt_data import SharegptTable, bench_side
from jevserve.bench.sources import content_id, split_of
from jevserve.bench.task import Item, frozen

_WORD = re.compile(r"\w+")
SHINGLE_WORDS = 8


def record_item(record: Any, state: str, label: Any, source: str, **extra: Any) -> Item:
    """An item for a bench.sources record: its content id, its side by the record's split key, its group."""
    return Item(
        item_id=record.record_id,
        state=state,
        label=label,
        split=split_of(record.split_key),
        source=source,
        group=record.group,
        extra=frozen(extra),
    )


def labelled_items(records: Iterable[Any], source: str, is_positive: Callable[[Any], bool]) -> list[Item]:
    """Items whose state is a LabelledText's text and whose label is `is_positive(record)`."""
    return [record_item(r, r.text, is_positive(r), source) for r in records]


def unique_by_id(items: Iterable[Item]) -> list[Item]:
    """The items in order, keeping the first of each id (two packages may ship the same text)."""
    seen: set[str] = set()
    out = []
    for item in items:
        if item.item_id not in seen:
            seen.add(item.item_id)
            out.append(item)
    return out


def shingles(text: str, size: int = SHINGLE_WORDS) -> set[tuple[str, ...]]:
    """The text's runs of `size` consecutive lower-cased words (near-duplicate detection)."""
    words = _WORD.findall(text.lower())
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


def sharegpt_negatives(
    table: SharegptTable, positives: Sequence[Item], *, exclude_like: Iterable[str] = (), source: str = "sharegpt"
) -> list[Item]:
    """One benign ShareGPT first prompt per positive, on the positive's side, nearest in log character length.

    Prompts sharing an 8-word run with any text of `exclude_like` are left out (ShareGPT users pasted some of the
    very jailbreaks the positives are). Positives are matched in cap order, so the result is deterministic.
    """
    banned: set[tuple[str, ...]] = set()
    for text in exclude_like:
        banned |= shingles(text)
    pools: dict[str, list[tuple[float, str, str]]] = {"train": [], "test": []}
    seen: set[str] = set()
    for request in table.requests:
        side = bench_side(request)
        item_id = content_id("text", request.prompt)
        if side is None or item_id in seen or not request.prompt.strip():
            continue
        seen.add(item_id)
        if banned and shingles(request.prompt) & banned:
            continue
        pools[side].append((math.log1p(len(request.prompt)), item_id, request.prompt))
    for pool in pools.values():
        pool.sort()
    negatives = []
    for positive in sorted(positives, key=lambda p: cap_order(p.item_id)):
        pool = pools[positive.split]
        if not pool:
            break
        target = math.log1p(len(positive.state))
        at = bisect.bisect_left(pool, (target,))
        nearest = min((i for i in (at - 1, at) if 0 <= i < len(pool)), key=lambda i: abs(pool[i][0] - target))
        _, item_id, prompt = pool.pop(nearest)
        negatives.append(Item(item_id=item_id, state=prompt, label=False, split=positive.split, source=source,
                              extra=frozen({"matched_to": positive.item_id})))
    return negatives
