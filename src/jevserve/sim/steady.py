"""Does a run keep up? A steady-state test on one finished run, so goodput never counts a growing backlog.

Latency-only definitions of goodput (DistServe: the highest rate at which >= 90% of requests meet the SLO;
vLLM's benchmark: requests meeting every SLO / duration) are read from finite open-loop runs. Past the engine's
capacity such a run still looks good for as long as the backlog takes to hurt, so its verdict depends on the run
length. The test here asks two things over the second half of the arrivals (the first half is warm-up):

1. **completions keep pace**: requests finished in the second half >= (1 - tol) x requests that arrived in it;
2. **the waiting queue does not trend up**: the Theil-Sen slope of the number of waiting requests (arrived, not yet
   admitted), sampled evenly over the second half, times the half's length, is at most tol x the arrivals in it.

Both are a backlog growth of at most `tol` (5%) of the offered requests; the first counts running requests too
(a backlog of admitted but stalled requests), the second is robust to the queue's ups and downs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from jevserve.sim.metrics import RequestRecord

KEEP_UP_TOLERANCE = 0.05
NUM_QUEUE_SAMPLES = 200


@dataclass(frozen=True, slots=True)
class KeepUp:
    """The steady-state verdict of one run and the two quantities it rests on."""

    keeps_up: bool
    completion_ratio: float  # completions / arrivals over the second half of the arrivals
    waiting_growth: float  # trend of the waiting queue over the second half, as a share of its arrivals
    margin: float  # how far inside both limits (>= 0 exactly when keeps_up), so goodput can interpolate

    def as_dict(self) -> dict[str, object]:
        """The fields, for a run's summary."""
        return {"keeps_up": self.keeps_up, "completion_ratio": self.completion_ratio,
                "waiting_growth": self.waiting_growth, "keep_up_margin": self.margin}

    @classmethod
    def from_dict(cls, data: dict) -> KeepUp:
        """A verdict read back from `as_dict`'s data (extra keys are ignored)."""
        return cls(data["keeps_up"], data["completion_ratio"], data["waiting_growth"], data["keep_up_margin"])


def keep_up(records: Sequence[RequestRecord], tol: float = KEEP_UP_TOLERANCE) -> KeepUp:
    """The verdict on finished requests' records (every request of the run, in any order)."""
    if not 0 < tol < 1:
        raise ValueError(f"tol={tol!r}; expected a fraction in (0, 1)")
    if len(records) < 4:  # too few to split into halves: nothing shows that the engine keeps up, so it is not counted
        return KeepUp(False, math.nan, math.nan, -math.inf)
    arrival = np.array([r.arrival_s for r in records])
    admit = arrival + np.array([r.wait_s for r in records])
    finish = arrival + np.array([r.e2el_s for r in records])
    start, end = float(arrival.min()), float(arrival.max())
    middle = (start + end) / 2
    arrived = int(np.count_nonzero(arrival >= middle))
    completed = int(np.count_nonzero((finish >= middle) & (finish <= end)))
    ratio = completed / arrived
    # waiting at instant t: arrived by t and not admitted by t (sorted arrays, so two searches per instant)
    instants = np.linspace(middle, end, NUM_QUEUE_SAMPLES)
    waiting = np.searchsorted(np.sort(arrival), instants, side="right") - np.searchsorted(
        np.sort(admit), instants, side="right")
    slope = float(stats.theilslopes(waiting, instants).slope) if end > middle else 0.0
    growth = slope * (end - middle) / arrived
    margin = min(ratio - (1 - tol), tol - growth)
    return KeepUp(margin >= 0, float(ratio), growth, float(margin))


def too_short_to_tell(records: Sequence[RequestRecord], tol: float = KEEP_UP_TOLERANCE) -> str | None:
    """Why the steady-state verdict cannot tell, or None. Two ways a run is too short for the completion test:

    - its second half of arrivals lasts under five median E2E latencies, so the requests still running at its end
      count against completions whatever the backlog does;
    - its second half has too few arrivals for a `tol` test: the test compares the requests in flight at the half's
      start and end, about lambda x mean E2E each (Little's law), and their count swings by chance by about
      2 sqrt(2 x that) (a Poisson count, two of them, two sigma) even in a steady state; when that swing exceeds
      `tol` of the arrivals, a steady engine fails the test by chance (at 10 req/s with 1.3 s E2E latencies, 100
      arrivals in the half are too few: 13 in flight, a swing of 10, against a tolerance of 5).
    """
    if len(records) < 4:
        return "fewer than 4 requests"
    arrival = np.array([r.arrival_s for r in records])
    e2el = np.array([r.e2el_s for r in records])
    half = (arrival.max() - arrival.min()) / 2
    latency = float(np.median(e2el))
    if half < 5 * latency:
        return (f"its second half of arrivals lasts {half:.1f} s, less than five times the median E2E latency "
                f"({latency:.1f} s)")
    arrived, in_flight, swing = _chance_swing(arrival, e2el)
    if swing > tol * arrived:
        requests = "request" if round(in_flight) == 1 else "requests"
        return (f"its second half has {arrived} arrivals with about {in_flight:.0f} {requests} in flight at a time, "
                f"whose count swings by about {swing:.0f} by chance, more than {100 * tol:g}% of the arrivals "
                f"({tol * arrived:.0f})")
    return None


def _chance_swing(arrival: np.ndarray, e2el: np.ndarray, sigmas: float = 2.0) -> tuple[int, float, float]:
    # (arrivals in the second half, requests in flight at a time, the chance swing of completions - arrivals over the
    # half at `sigmas`): the requests in flight at its start and end, two Poisson counts of about lambda x mean E2E
    half = (arrival.max() - arrival.min()) / 2
    arrived = int(np.count_nonzero(arrival >= arrival.min() + half))
    in_flight = arrived / half * float(np.mean(e2el)) if half > 0 else 0.0
    return arrived, in_flight, sigmas * math.sqrt(2 * in_flight)


def completion_swing(records: Sequence[RequestRecord]) -> float:
    """The share of the second half's arrivals by which its completions may differ from them by chance in a steady
    state (three sigma: at two, a run at 100 req/s, well inside a replica's 117, fell that far short); a shortfall
    beyond it says the backlog grew. nan with fewer than 4 records."""
    if len(records) < 4:
        return math.nan
    arrival, e2el = np.array([r.arrival_s for r in records]), np.array([r.e2el_s for r in records])
    arrived, _, swing = _chance_swing(arrival, e2el, sigmas=3.0)
    return swing / arrived if arrived else math.nan


def verdict_as_far_as_told(
    verdict: KeepUp, too_short: str | None, tol: float = KEEP_UP_TOLERANCE
) -> tuple[bool | None, float]:
    """(keeps up, margin) as far as a run can tell. A run too short for the completion test (`too_short_to_tell`)
    is read on its waiting queue alone, whose trend the requests still running at its end do not touch: a queue
    that grows by more than `tol` says the engine falls behind (False); one that does not cannot say it keeps up
    (None), and its margin is the queue's alone."""
    if too_short is None:
        return verdict.keeps_up, verdict.margin
    margin = tol - verdict.waiting_growth
    return (False if margin < 0 else None), margin


# A backlog that grew by more than this share of the second half's arrivals is noted, though within the tolerance.
NOTED_GROWTH = 0.01


def falling_behind(waiting_growth: float, completion_ratio: float, swing: float) -> str | None:
    """What says a run that keeps up may still be falling behind: its waiting queue trending up by more than
    NOTED_GROWTH of the second half's arrivals, or its completions short of them by more than that and more than
    their chance `swing` (`completion_swing`); None when neither does."""
    said = []
    if waiting_growth > NOTED_GROWTH:
        said.append(f"the waiting queue grew by {100 * waiting_growth:.1f}% of the second half's arrivals")
    if completion_ratio < 1 - max(NOTED_GROWTH, swing):
        said.append(f"completions fell {100 * (1 - completion_ratio):.1f}% short of the second half's arrivals")
    return " and ".join(said) or None


@dataclass(frozen=True, slots=True)
class SteadyReading:
    """What one finished run says about its steady state, as far as it can tell; what `jevserve sim run` and
    `jevserve loadgen` print after a run."""

    verdict: KeepUp
    too_short: str | None  # why the completion test cannot tell (None: it can, or the queue grew past tol anyway)
    behind: str | None  # what says a run within the tolerance may still be falling behind

    @property
    def keeps_up(self) -> bool | None:
        """True, False, or None when the run is too short to tell."""
        return verdict_as_far_as_told(self.verdict, self.too_short)[0]


def steady_reading(records: Sequence[RequestRecord]) -> SteadyReading:
    """keep_up, too_short_to_tell and falling_behind of one run, read together."""
    verdict = keep_up(records)
    short = too_short_to_tell(records)
    if short and verdict_as_far_as_told(verdict, short)[0] is False:
        short = None  # its waiting queue grew past the tolerance: it falls behind, however long the run
    behind = None
    if verdict.keeps_up and not short:
        behind = falling_behind(verdict.waiting_growth, verdict.completion_ratio, completion_swing(records))
    return SteadyReading(verdict, short, behind)
