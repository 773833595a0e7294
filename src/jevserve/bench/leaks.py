"""The test side without near-duplicates of anything training may read (bench.neardup), across every task.

Sides come from content hashes, so an exact text is on one side everywhere; a near-duplicate (a jailbreak with a
word changed, a BFCL request inside another case) can still cross. A test item whose 5-word runs are at least 80%
inside one text that training may read, or whose runs have a Jaccard similarity of at least 0.5 with one such text,
is dropped from the test side together with its matched partner (a pooled task's length-matched negative).
Dropping the test copy, rather than moving it to train, leaves every train side, and so every trained readout,
exactly as it was.

What training may read, for this check: the state of every train item of every task, and every string of every
train-side record of every source the tasks read (the synthetic families of `jevserve train`, e.g. BFCL tool choice,
read only those), the ShareGPT prompts of the train side and the user texts of the everyday source's train side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jevserve.bench.neardup import ReferenceIndex, record_texts
from jevserve.bench.sharegpt_data import bench_side
from jevserve.bench.sources import SOURCES, SourceMissingError, active_salt, split_of
from jevserve.bench.task import Item, Task, split_items

MIN_WORDS = 8  # shorter strings have fewer than neardup.MIN_SHINGLES runs and are left to the exact check


def training_texts(data: Any, tasks: Sequence[Task], log: Callable[[str], None] = print) -> list[str]:
    """Every text training may read (see the module docstring), each once."""
    texts: list[str] = []
    sources: set[str] = set()
    for task in tasks:
        try:
            train, _ = split_items(task.load_items(data))
        except SourceMissingError:
            continue
        texts += [i.state for i in train]
        sources |= set(task.sources)
    for name in sorted(sources & set(SOURCES)):
        try:
            records = data.source(name)
        except SourceMissingError:
            continue
        for record in records:
            if split_of(record.split_key) == "train":
                texts += [t for t in record_texts(record) if len(t.split()) >= MIN_WORDS]
    if "sharegpt" in sources:
        texts += [r.prompt for r in data.sharegpt().requests if bench_side(r) == "train"]
        texts += _everyday_train_texts(data)
    log(f"leak check: test items that nearly repeat any of {len(texts):,} texts training may read are left out")
    return list(dict.fromkeys(texts))


def _everyday_train_texts(data: Any) -> list[str]:
    # Training may read the everyday source's train side (ordinary requests as negatives), so its user texts count.
    from jevserve.bench.sources.everyday import load_everyday, user_texts

    try:
        train = load_everyday("train", data.cache)
    except SourceMissingError:
        return []
    return [t for r in train for t in user_texts(r.body) if len(t.split()) >= MIN_WORDS]


def reference_index(data: Any, log: Callable[[str], None] = print) -> ReferenceIndex:
    """The index of `training_texts` over every registered task, built once per data object and split salt."""
    from jevserve.bench.tasks import TASKS

    cache = data.__dict__.setdefault("_near_duplicate_index", {})
    salt = active_salt()
    if salt not in cache:
        cache[salt] = ReferenceIndex(training_texts(data, list(TASKS.values()), log))
    return cache[salt]


def without_near_duplicates(test: Sequence[Item], index: ReferenceIndex) -> tuple[tuple[Item, ...], int]:
    """The test items that are not near-duplicates of a training text, and how many were dropped.

    A matched pair (a pooled task's positive and the negative chosen for it, `extra["matched_to"]`) goes together:
    dropping only the flagged half would remove positives far more often than negatives and shift the balance.
    """
    flagged = index.near_duplicates([i.state for i in test])
    dropped = {i.item_id for i, bad in zip(test, flagged, strict=True) if bad}
    partner = {}
    for item in test:
        matched = item.extra.get("matched_to")
        if matched:
            partner[item.item_id], partner[matched] = matched, item.item_id
    dropped |= {partner[i] for i in dropped if i in partner}
    kept = tuple(i for i in test if i.item_id not in dropped)
    return kept, len(test) - len(kept)
