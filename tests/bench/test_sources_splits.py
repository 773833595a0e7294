"""Hash-based train/test splits: deterministic, salted, ~70/30, groups kept together, leaks detected."""

from __future__ import annotations

import pytest

from jevserve.bench.sources import (
    DEFAULT_SALT,
    LabelledText,
    SplitLeakError,
    check_disjoint,
    split_of,
    split_records,
)


def make_texts(n: int, group_every: int = 0) -> list[LabelledText]:
    """n distinct benign texts; with group_every=k, consecutive blocks of k share a group."""
    return [
        LabelledText(
            text=f"question number {i}",
            label="benign",
            origin=f"test:{i}",
            group=f"g{i // group_every}" if group_every else "",
        )
        for i in range(n)
    ]


def test_split_of_is_deterministic_for_the_same_id_and_salt():
    sides = [split_of(f"id-{i}", "task-a") for i in range(200)]
    assert sides == [split_of(f"id-{i}", "task-a") for i in range(200)]


def test_split_of_gives_about_thirty_percent_test_by_default():
    ids = [f"id-{i}" for i in range(10_000)]
    share = sum(split_of(i, "task-a") == "test" for i in ids) / len(ids)
    # Binomial sd is 0.0046 at n=10,000; 0.02 is over four sd, and the ids are fixed, so this never flickers.
    assert abs(share - 0.3) < 0.02


def test_split_of_honours_the_test_fraction():
    ids = [f"id-{i}" for i in range(10_000)]
    share = sum(split_of(i, "task-a", test_fraction=0.5) == "test" for i in ids) / len(ids)
    assert abs(share - 0.5) < 0.02


def test_a_different_salt_gives_a_different_assignment():
    ids = [f"id-{i}" for i in range(1_000)]
    a = [split_of(i, "task-a") for i in ids]
    b = [split_of(i, "task-b") for i in ids]
    assert a != b


def test_split_of_rejects_an_empty_salt():
    with pytest.raises(ValueError, match="salt must be a non-empty string"):
        split_of("id-1", "")


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_split_of_rejects_a_test_fraction_outside_zero_one(fraction):
    with pytest.raises(ValueError, match=r"test_fraction must be strictly between 0 and 1, got"):
        split_of("id-1", "task-a", test_fraction=fraction)


def test_split_records_does_not_depend_on_record_order_or_count():
    records = make_texts(500)
    full = split_records(records, "task-a")
    reversed_split = split_records(list(reversed(records)), "task-a")
    half = split_records(records[:250], "task-a")
    assert {r.record_id for r in full.test} == {r.record_id for r in reversed_split.test}
    assert {r.record_id for r in half.test} <= {r.record_id for r in full.test}


def test_split_records_train_and_test_are_disjoint_and_cover_every_record():
    records = make_texts(400)
    split = split_records(records, "task-a")
    train_ids = {r.record_id for r in split.train}
    test_ids = {r.record_id for r in split.test}
    assert not train_ids & test_ids
    assert train_ids | test_ids == {r.record_id for r in records}
    check_disjoint(train_ids, test_ids)


def test_records_of_one_group_always_share_a_side():
    records = make_texts(300, group_every=3)
    split = split_records(records, "task-a")
    groups_in_train = {r.group for r in split.train}
    groups_in_test = {r.group for r in split.test}
    assert not groups_in_train & groups_in_test
    assert groups_in_test  # 100 groups: both sides are populated


def test_check_disjoint_names_the_shared_ids():
    with pytest.raises(SplitLeakError, match=r"1 record id\(s\) are in both train and test, e.g. b"):
        check_disjoint(["a", "b"], ["b", "c"])


def test_the_default_salt_puts_a_record_on_the_same_side_in_every_task():
    records = make_texts(300)
    guard_task = split_records(records)
    refusal_task = split_records(records[100:])  # another task sharing part of the source
    test_ids = {r.record_id for r in guard_task.test}
    assert all(r.record_id in test_ids for r in refusal_task.test)
    assert all(split_of(r.split_key) == split_of(r.split_key, DEFAULT_SALT) for r in records)


def test_a_split_salt_moves_records_inside_its_block_only():
    from jevserve.bench.sources import DEFAULT_SALT, active_salt, split_of, split_salt

    keys = [f"record-{i}" for i in range(400)]
    before = [split_of(k) for k in keys]
    with split_salt("another-salt"):
        assert active_salt() == "another-salt"
        inside = [split_of(k) for k in keys]
    assert active_salt() == DEFAULT_SALT and [split_of(k) for k in keys] == before
    assert inside != before and inside == [split_of(k, "another-salt") for k in keys]
    assert 0.2 < inside.count("test") / len(keys) < 0.4


def test_an_empty_split_salt_is_refused():
    import pytest

    from jevserve.bench.sources import split_salt

    with pytest.raises(ValueError, match="non-empty"), split_salt(""):
        pass
