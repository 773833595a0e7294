"""Round draws: seeded, every decision present, answers balanced."""

from __future__ import annotations

from collections import Counter

from jevserve.web.decisions import DECISIONS, ROUND_SIZE, PoolItem, Pools, answer_value, draw_round


def _pools() -> Pools:
    items = {}
    for key, decision in DECISIONS.items():
        truths = [v for v, _ in decision.options]
        # a skewed pool: 90% of items carry the first answer
        items[key] = [PoolItem(f"{key}-{i}", f"text {i}", None, truths[0] if i % 10 else truths[i // 10 % len(truths)])
                      for i in range(200)]
    return Pools.from_items(items)


def test_same_seed_draws_the_same_round():
    pools = _pools()
    assert draw_round(pools, 42) == draw_round(pools, 42)
    assert draw_round(pools, 42) != draw_round(pools, 43)


def test_round_has_every_decision_and_no_repeated_item():
    pools = _pools()
    for seed in range(50):
        drawn = draw_round(pools, seed)
        assert len(drawn) == ROUND_SIZE
        assert set(DECISIONS) <= {k for k, _ in drawn}
        assert len(set(drawn)) == ROUND_SIZE


def test_answers_are_balanced_even_when_the_pool_is_skewed():
    pools = _pools()
    truths = Counter()
    for seed in range(2000):
        for key, item_id in draw_round(pools, seed):
            if key == "injection":
                truths[pools.get(key, item_id).truth] += 1
    share = truths["yes"] / (truths["yes"] + truths["no"])
    assert 0.45 < share < 0.55  # the pool holds 90% "no"... or "yes"; the draw is 50/50 either way


def test_length_labels_map_to_the_four_bins_at_150_300_500_tokens():
    length = DECISIONS["length"]
    assert [answer_value(length, t) for t in (149, 150, 299, 300, 499, 500)] == [
        "short", "medium", "medium", "long", "long", "very long"]
    assert answer_value(DECISIONS["cache"], True) == "yes"


def test_every_reply_length_bin_names_its_unit():
    # shown side by side on a reveal: "very long (≥ 500)" beside "short (< 150 tokens)"
    from jevserve.web.decisions import DECISIONS

    labels = [label for _, label in DECISIONS["length"].options]
    assert len(labels) == 4 and all(label.endswith(" tokens)") for label in labels)
