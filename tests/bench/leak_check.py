"""The exact near-duplicate check the leak tests apply: plain shingle sets and an inverted index, no hashing."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from jevserve.bench.neardup import JACCARD_THRESHOLD, MIN_SHINGLES, THRESHOLD, shingles
from jevserve.bench.task import Item


def crossing_items(train_states: Sequence[str], test: Iterable[tuple[str, Item]]) -> list[tuple[str, str]]:
    """(task, item id) of every test item with ≥ 80% of its 5-word runs in one train state, or a Jaccard
    similarity ≥ 0.5 with one train state."""
    postings: dict[tuple, list[int]] = defaultdict(list)
    sizes = []
    for k, state in enumerate(train_states):
        runs = set(shingles(state))
        sizes.append(len(runs))
        for run in runs:
            postings[run].append(k)
    crossing = []
    for task, item in test:
        runs = set(shingles(item.state))
        if len(runs) < MIN_SHINGLES:
            continue
        shared = Counter(k for run in runs for k in postings.get(run, ()))
        for k, count in shared.items():
            if count >= THRESHOLD * len(runs) or count / (len(runs) + sizes[k] - count) >= JACCARD_THRESHOLD:
                crossing.append((task, item.item_id))
                break
    return crossing
