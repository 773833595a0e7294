"""Comparisons between board rows on shared draws: paired differences, minimum detectable differences, ranks.

- Paired Δ of two rows: the difference of their scores on each draw (the same test items for both), its 95%
  percentile interval and P(Δ > 0), the share of draws on which the first row is ahead. Δ of a row with itself is
  exactly 0 on every draw.
- Minimum detectable difference at 80% power (two-sided 5% test): (z₀.₉₇₅ + z₀.₈₀) × the standard deviation of the
  paired Δ over draws, the smallest true difference between those two rows the test side would detect four times
  in five.
- Ranks: 1 + the number of rows statistically ahead of this one, LMArena's rule read on the paired Δ: a row is
  ahead when the 95% interval of its paired Δ over this row lies wholly above 0. LMArena counts rows whose own
  interval lies wholly above this row's; on shared draws that misses differences the pair resolves (two rows whose
  intervals overlap can differ on every draw) and can put a row at rank 1 that is first on no draw. Beside it, the
  2.5th–97.5th percentile of the row's rank over draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from jevserve.bench.stats import interval

POWER = 0.80
ALPHA = 0.05
MDD_FACTOR = NormalDist().inv_cdf(1 - ALPHA / 2) + NormalDist().inv_cdf(POWER)  # 1.96 + 0.84 = 2.80


@dataclass(frozen=True)
class PairedDelta:
    """Row `a` minus row `b` on the same draws."""

    a: str
    b: str
    delta: float  # on the whole test side
    low: float  # 95% interval over draws
    high: float
    p_greater: float  # share of draws with Δ > 0


def paired_delta(
    a: str, b: str, a_point: float, b_point: float, a_draws: np.ndarray, b_draws: np.ndarray
) -> PairedDelta:
    """The paired difference a − b."""
    diff = np.asarray(a_draws, dtype=np.float64) - np.asarray(b_draws, dtype=np.float64)
    finite = diff[np.isfinite(diff)]
    low, high = interval(diff)
    p = float(np.mean(finite > 0)) if finite.size else float("nan")
    return PairedDelta(a, b, float(a_point - b_point), low, high, p)


def minimum_detectable_difference(a_draws: np.ndarray, b_draws: np.ndarray) -> float:
    """(z₀.₉₇₅ + z₀.₈₀) × sd of the paired difference over draws."""
    diff = np.asarray(a_draws, dtype=np.float64) - np.asarray(b_draws, dtype=np.float64)
    finite = diff[np.isfinite(diff)]
    return float(MDD_FACTOR * np.std(finite, ddof=1)) if finite.size > 1 else float("nan")


def paired_ranks(draws: Mapping[str, np.ndarray]) -> dict[str, int]:
    """1 + the number of rows whose paired Δ over this row (on the same draws) has a 95% interval above 0."""
    def ahead(other: str, name: str) -> bool:
        low, _ = interval(np.asarray(draws[other], dtype=np.float64) - np.asarray(draws[name], dtype=np.float64))
        return low > 0  # NaN (no finite draw) is never ahead

    return {name: 1 + sum(ahead(other, name) for other in draws if other != name) for name in draws}


@dataclass(frozen=True)
class DrawRanks:
    """A row's rank on the whole test side and the 95% range of its ranks over draws (1 = best)."""

    rank: int
    low: int
    high: int
    first_share: float  # share of draws on which the row is first


def draw_ranks(draws: Mapping[str, np.ndarray], point: Mapping[str, float]) -> dict[str, DrawRanks]:
    """Rank rows on every draw (ties share the better rank) and on the point estimates."""
    from scipy import stats  # here: scipy.stats costs a second at start-up, and only building a board ranks
    names = list(draws)
    matrix = np.vstack([np.where(np.isfinite(draws[n]), draws[n], -np.inf) for n in names])
    ranks = stats.rankdata(-matrix, axis=0, method="min")
    point_ranks = stats.rankdata([-point[n] for n in names], method="min")
    out = {}
    for k, name in enumerate(names):
        low, high = np.percentile(ranks[k], [2.5, 97.5], method="nearest")
        out[name] = DrawRanks(int(point_ranks[k]), int(low), int(high), float(np.mean(ranks[k] == 1)))
    return out
