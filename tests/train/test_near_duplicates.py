"""With the real data: nothing `jevserve train` or `jevserve train --reader` reads (task train sides, synthetic
families, question variants, attribute questions, their question texts) is a near-duplicate of a bench test item.
`collect_examples(..., variants=True, attributes=True)` is everything either reads."""

from __future__ import annotations

import pytest

from jevserve.bench import TASKS
from jevserve.bench.neardup import ReferenceIndex
from jevserve.decide.trained import question_texts
from jevserve.train.run import collect_examples


@pytest.mark.slow
def test_no_text_training_reads_nearly_contains_a_bench_test_item(bench_tasks):
    data, loaded = bench_tasks
    examples = collect_examples(data, list(TASKS.values()), variants=True, attributes=True, log=lambda _m: None)
    read = {ex.state for ex in examples}
    for ex in examples:
        read.update(question_texts(ex.question))
    index = ReferenceIndex(sorted(read))
    leaks = [(e.task.name, i.item_id) for e in loaded for i, bad in
             zip(e.test, index.near_duplicates([i.state for i in e.test]), strict=True) if bad]
    assert not leaks, f"{len(leaks)} test items are near-duplicates of training texts, e.g. {leaks[:3]}"
