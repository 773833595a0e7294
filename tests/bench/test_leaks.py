"""With the real data (when fetched): no state is on the train side of one task and the test side of another."""

from __future__ import annotations

import pytest

from jevserve.bench import TASKS, BenchData, split_items, state_key
from jevserve.bench.sources import SourceMissingError
from tests.bench.leak_check import crossing_items


@pytest.mark.slow
def test_no_state_is_on_both_sides_across_all_tasks():
    data = BenchData()
    train, test = set(), set()
    for task in TASKS.values():
        try:
            train_items, test_items = split_items(task.load_items(data))
        except SourceMissingError as exc:
            pytest.skip(f"needs the bench data: {exc}")
        train |= {state_key(i) for i in train_items}
        test |= {state_key(i) for i in test_items}
    assert train and test
    assert not train & test


@pytest.mark.slow
def test_no_test_state_is_a_near_duplicate_of_a_train_state_across_all_tasks(bench_tasks):
    """Exact shingle sets (no hashing, an inverted index): no test item has ≥ 80% of its 5-word runs in one train
    state of any task, or a Jaccard similarity ≥ 0.5 with one, after the bench's near-duplicate filter."""
    _, loaded = bench_tasks
    train_states = list(dict.fromkeys(i.state for e in loaded for i in e.train))
    crossing = crossing_items(train_states, [(e.task.name, i) for e in loaded for i in e.test])
    assert not crossing, f"{len(crossing)} test items are near-duplicates of train states, e.g. {crossing[:3]}"
    assert sum(e.near_duplicates_dropped for e in loaded) > 0  # the filter had something to do on this data
