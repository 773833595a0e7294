"""Paired differences, minimum detectable differences and ranks on shared draws, against known answers."""

from __future__ import annotations

import numpy as np
import pytest

from jevserve.bench.compare import MDD_FACTOR, draw_ranks, minimum_detectable_difference, paired_delta, paired_ranks
from jevserve.bench.stats import interval


def test_the_paired_difference_of_a_row_with_itself_is_exactly_zero():
    draws = np.random.default_rng(0).normal(10, 5, 1000)
    delta = paired_delta("a", "a", 10.0, 10.0, draws, draws.copy())
    assert (delta.delta, delta.low, delta.high, delta.p_greater) == (0.0, 0.0, 0.0, 0.0)


def test_a_row_ahead_on_every_draw_has_p_one():
    draws = np.linspace(0, 10, 500)
    delta = paired_delta("a", "b", 6.0, 5.0, draws + 1, draws)
    assert delta.delta == 1.0 and delta.low == pytest.approx(1.0) and delta.p_greater == 1.0


def test_the_mdd_is_2_8_standard_deviations_of_the_paired_difference():
    rng = np.random.default_rng(1)
    b = rng.normal(0, 3, 20_000)
    a = b + rng.normal(0, 4, 20_000)  # the shared part cancels: the difference has sd 4
    assert pytest.approx(1.95996 + 0.84162, abs=1e-4) == MDD_FACTOR
    assert minimum_detectable_difference(a, b) == pytest.approx(MDD_FACTOR * 4, rel=0.02)


def test_ranks_count_the_rows_ahead_on_the_paired_difference_not_on_overlapping_intervals():
    shared = np.random.default_rng(3).normal(0, 5, 4000)  # the test items' draw, common to every row
    noise = np.random.default_rng(4).normal(0, 0.5, (4, 4000))
    draws = {"a": 30 + shared + noise[0], "b": 25 + shared + noise[1], "c": 25.1 + shared + noise[2]}
    # a's and b's own intervals overlap widely (sd 5), yet a is ahead of b on every draw: b is not tied for first
    assert interval(draws["a"])[0] < interval(draws["b"])[1]
    ranks = paired_ranks(draws)
    assert ranks == {"a": 1, "b": 2, "c": 2}  # b and c are not resolved: neither is ahead of the other


def test_draw_ranks_put_a_row_that_is_never_behind_first_on_every_draw():
    base = np.random.default_rng(2).normal(0, 1, 400)
    ranks = draw_ranks({"a": base + 1, "b": base}, {"a": 1.0, "b": 0.0})
    assert ranks["a"].rank == ranks["a"].low == ranks["a"].high == 1 and ranks["a"].first_share == 1.0
    assert ranks["b"].low == 2
