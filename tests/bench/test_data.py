"""Seeded caps keep the same items on every machine."""

from __future__ import annotations

from jevserve.bench.data import cap_per_label
from tests.bench.builders import make_items


def test_cap_per_label_keeps_at_most_n_of_each_label_in_the_original_order():
    items = make_items([True] * 30 + [False] * 10)
    kept = cap_per_label(items, 8)
    assert sum(i.label for i in kept) == 8 and sum(not i.label for i in kept) == 8
    positions = [items.index(i) for i in kept]
    assert positions == sorted(positions)


def test_cap_per_label_depends_only_on_item_ids():
    items = make_items([True] * 30)
    forward = {i.item_id for i in cap_per_label(items, 5)}
    assert forward == {i.item_id for i in cap_per_label(list(reversed(items)), 5)}
    assert forward != {i.item_id for i in items[:5]}  # not the first five: the order is the hash, not the position
