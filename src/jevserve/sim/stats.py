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


MIN_BATCHES, MAX_BATCHES = 5, 10  # batch means' batches; see batches_for
REQUESTS_PER_BATCH = 100
SHORT_RUN_REQUESTS = 1000  # under this, a run near saturation sits measurably above a long one (sim run says so)


def batches_for(num_requests: int) -> int:
    """How many consecutive batches `batch_means_interval` cuts a run into: one per REQUESTS_PER_BATCH requests,
    within [MIN_BATCHES, MAX_BATCHES]. A short run gets fewer, longer batches: near saturation the queue remembers for
    long, and ten batches of 40 requests were too short against it (their intervals held the long-run attainment in
    68-87 % of 400-request runs; benchmarks/sim/attainment_interval.py)."""
    return min(MAX_BATCHES, max(MIN_BATCHES, num_requests // REQUESTS_PER_BATCH))


def batch_means_interval(met: Sequence[bool], confidence: float = 0.95) -> tuple[float, float, float] | None:
    """(share, low, high): an interval for the share of `met` (one run's requests in arrival order) by the method of
    batch means. Requests of one run are not independent (a backlog makes its neighbours miss together), so a
    binomial interval on all of them is far too narrow; consecutive batches are close to independent when each is
    long against the queue's memory. The run is cut into `batches_for(len(met))` batches; the variance of their
    shares gives the run's effective number of independent requests (p(1-p) over it, at most the run's length: a
    run cannot say more than that many independent requests would), and the interval is Wilson's for the share at
    that many requests, at the confidence a Student-t with one less degree of freedom than batches gives (the
    variance is estimated from few batches). Wilson's, not the t interval of the batch shares: shares near 1 are
    skewed, and a run whose batches all met gets a bound from its length rather than [1, 1]. None with fewer than
    two requests per batch."""
    x = np.asarray(met, dtype=np.float64)
    batches = batches_for(x.size)
    if x.size < 2 * batches:
        return None
    share = float(np.mean(x))
    shares = np.array([float(np.mean(b)) for b in np.array_split(x, batches)])
    variance = float(np.var(shares, ddof=1)) / batches
    effective = x.size if variance <= 0 else min(float(x.size), share * (1 - share) / variance)
    z = stats.t.ppf(0.5 + confidence / 2, df=batches - 1)  # the t quantile, as a normal one's confidence
    level = 2 * stats.norm.cdf(z) - 1
    trials = max(1, round(effective))
    found = stats.binomtest(min(trials, round(share * trials)), trials).proportion_ci(level, method="wilson")
    return share, min(share, float(found.low)), max(share, float(found.high))  # share rounded to whole trials


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
