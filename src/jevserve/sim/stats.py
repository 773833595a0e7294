"""Statistics across runs: 95% intervals over arrival seeds, DistServe's goodput (max rate meeting a target) and
the steady-state goodput (the same, counting only rates at which the engine keeps up)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, low, high): a Student-t interval of the mean over seeds; low = high = nan with one value."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("mean_interval: no values")
    mean = float(np.mean(x))
    if x.size < 2:
        return mean, math.nan, math.nan
    if np.all(x == x[0]):
        return mean, mean, mean
    low, high = stats.t.interval(confidence, df=x.size - 1, loc=mean, scale=stats.sem(x))
    return mean, float(low), float(high)


BATCHES = 10  # batch means' batches: few enough that each is long against the queue's memory, enough for a t


def batch_means_interval(
    met: Sequence[bool], batches: int = BATCHES, confidence: float = 0.95
) -> tuple[float, float, float] | None:
    """(share, low, high): an interval for the share of `met` (one run's requests in arrival order) by the method of
    batch means: the run cut into `batches` consecutive batches, a Student-t interval over their shares. Requests of
    one run are not independent (a backlog makes its neighbours miss together), so a binomial interval would be far
    too narrow; consecutive batches are close to independent when each is long against the queue's memory. None
    with fewer than two requests per batch."""
    x = np.asarray(met, dtype=np.float64)
    if x.size < 2 * batches:
        return None
    shares = [float(np.mean(b)) for b in np.array_split(x, batches)]
    _, low, high = mean_interval(shares, confidence)
    return float(np.mean(x)), max(0.0, low), min(1.0, high)


def max_rate_meeting(rates: Sequence[float], attainment: Sequence[float], target: float = 0.9) -> tuple[float, str]:
    """DistServe's goodput: the highest rate whose SLO attainment is still >= target, interpolated linearly
    between the last rate that meets it and the next one; returns (rate, qualifier) where the qualifier is
    '' inside the sweep, '>=' if every rate meets it and '<' if none does."""
    r = np.asarray(rates, dtype=np.float64)
    a = np.asarray(attainment, dtype=np.float64)
    if r.size == 0 or r.size != a.size or np.any(np.diff(r) <= 0):
        raise ValueError("max_rate_meeting: rates must be strictly increasing and match attainment in length")
    if a[0] < target:
        return float(r[0]), "<"
    failing = np.nonzero(a < target)[0]
    if failing.size == 0:
        return float(r[-1]), ">="
    j = int(failing[0])  # first rate that misses; j - 1 meets
    frac = (a[j - 1] - target) / (a[j - 1] - a[j])
    return float(r[j - 1] + frac * (r[j] - r[j - 1])), ""


def steady_goodput(
    rates: Sequence[float],
    attainment: Sequence[float],
    keeps_up: Sequence[bool],
    target: float = 0.9,
    margins: Sequence[float] | None = None,
) -> tuple[float, str]:
    """Goodput counting a rate only when it keeps up (see `jevserve.sim.steady`): DistServe's interpolated rate
    where attainment crosses `target`, capped where the engine stops keeping up; a run that meets the SLO while
    its backlog grows is not counted. The cap is the last rate that keeps up, or, given each rate's keep-up
    margin (>= 0 when it keeps up), the rate where the margin crosses zero, interpolated linearly as attainment
    is. Returns (rate, qualifier) as `max_rate_meeting` does."""
    if len(keeps_up) != len(rates) or (margins is not None and len(margins) != len(rates)):
        raise ValueError("steady_goodput: keeps_up and margins must match rates in length")
    ok = np.asarray(keeps_up, dtype=bool)
    if not ok[0]:
        return float(rates[0]), "<"
    if ok.all():
        return max_rate_meeting(rates, attainment, target)
    j = int(np.argmin(ok))  # the first rate that falls behind; j - 1 keeps up
    latency, qualifier = max_rate_meeting(rates[: j + 1], attainment[: j + 1], target)
    if qualifier == ">=":
        latency = float(rates[j])
    cap = float(rates[j - 1])
    if margins is not None and margins[j - 1] >= 0 > margins[j]:
        cap += margins[j - 1] / (margins[j - 1] - margins[j]) * (rates[j] - rates[j - 1])
    return min(latency, cap), ""
