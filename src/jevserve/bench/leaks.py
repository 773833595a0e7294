"""The test side without near-duplicates of anything training may read (bench.neardup), across every task.

Sides come from content hashes, so an exact text is on one side everywhere; a near-duplicate (a jailbreak with a
word changed, a BFCL request inside another case) can still cross. A test item whose 5-word runs are at least 80%
inside one text that training may read is dropped from the test side. Dropping the test copy, rather than moving
it to train, leaves every train side, and so every trained readout, exactly as it was.

What training may read, for this check: the state of every train item of every task, and every string of every
train-side record of every source the tasks read (the synthetic families of `jevserve train`, e.g. BFCL tool choice,
read only those) and the ShareGPT prompts of the train side.
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
    log(f"near-duplicate check: {len(texts):,} texts training may read")
    return list(dict.fromkeys(texts))


def reference_index(data: Any, log: Callable[[str], None] = print) -> ReferenceIndex:
    """The index of `training_texts` over every registered task, built once per data object and split salt."""
    from jevserve.bench.tasks import TASKS

    cache = data.__dict__.setdefault("_near_duplicate_index", {})
    salt = active_salt()
    if salt not in cache:
        cache[salt] = ReferenceIndex(training_texts(data, list(TASKS.values()), log))
    return cache[salt]


def without_near_duplicates(test: Sequence[Item], index: ReferenceIndex) -> tuple[tuple[Item, ...], int]:
    """The test items that are not near-duplicates of a training text, and how many were dropped."""
    flagged = index.near_duplicates([i.state for i in test])
    kept = tuple(i for i, bad in zip(test, flagged, strict=True) if not bad)
    return kept, len(test) - len(kept)
