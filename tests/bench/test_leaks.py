"""With the real data (when fetched): no state is on the train side of one task and the test side of another."""

from __future__ import annotations

import pytest

from jevserve.bench import TASKS, BenchData, split_items, state_key
from jevserve.bench.sources import SourceMissingError


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
