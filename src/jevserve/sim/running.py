"""The simulator's running batch: the planner's `RunningBatch` plus every request's token times, kept cheaply.

The engine records the end of every step once (`StepEnds`), and a request only notes the step where its current
run of consecutive tokens began (the `streak` column); the times are copied to `SimRequest.token_times` when the
run breaks (it was left out of a step, preempted or finished).
"""

from __future__ import annotations

import numpy as np

from jevserve.serving.running_batch import RunningBatch
from jevserve.sim.entities import SimRequest


class StepEnds:
    """The end times (s) of every step an engine has applied, in order, in one growing array."""

    def __init__(self) -> None:
        self._ends = np.empty(1024, dtype=np.float64)
        self.count = 0

    def _reserve(self, extra: int) -> None:
        if self.count + extra > self._ends.size:
            grown = np.empty(max(2 * self._ends.size, self.count + extra), dtype=np.float64)
            grown[: self.count] = self._ends[: self.count]
            self._ends = grown

    def append(self, end_s: float) -> None:
        """Record one step's end."""
        self._reserve(1)
        self._ends[self.count] = end_s
        self.count += 1

    def extend(self, ends_s: np.ndarray) -> None:
        """Record the ends of a run of steps."""
        self._reserve(len(ends_s))
        self._ends[self.count : self.count + len(ends_s)] = ends_s
        self.count += len(ends_s)

    def last(self) -> float:
        """The end of the last step recorded."""
        return float(self._ends[self.count - 1])

    def between(self, first: int, stop: int) -> np.ndarray:
        """A copy of the ends of steps first .. stop - 1."""
        return self._ends[first:stop].copy()


class TimedRunningBatch(RunningBatch):
    """A running batch whose requests (`SimRequest`s) get their first-token time and every token time.

    The engine records a step's ends in `ends` before the planner applies the step, so `record_step` finds them
    there. `streak` holds, per row, the index in `ends` of the step from which the request has had a token at every
    step (-1 when it is not decoding).
    """

    INT_COLUMNS = (*RunningBatch.INT_COLUMNS, "streak")

    def __init__(self, ends: StepEnds) -> None:
        super().__init__()
        self.ends = ends

    def append(self, request: SimRequest, num_scheduled: int) -> None:
        """Add a request admitted with `num_scheduled` tokens; it has no streak yet."""
        super().append(request, num_scheduled)
        self.streak[self.n - 1] = -1

    def record_step(self, num_rows: int, sampled: np.ndarray | None, num_steps: int) -> None:
        """Start streaks of rows that sampled, note first tokens, and end the streaks of rows left out."""
        first = self.ends.count - num_steps  # index of this batch's first step
        streak = self.streak[:num_rows]
        if sampled is None:  # a decode run: every row sampled at every step
            streak[streak < 0] = first
            return
        streak[sampled & (streak < 0)] = first
        now_s = self.ends.last()
        for i in (sampled & (self.generated[:num_rows] == 1)).nonzero()[0].tolist():
            request = self.requests[i]
            if request.first_token_s is None:
                request.first_token_s = now_s
        # Rows left out of this step (the budget ran out before them) stop their run of consecutive tokens.
        for i in (self.streak[num_rows : self.n] >= 0).nonzero()[0].tolist():
            self.close_streak(num_rows + i, first)

    def on_leave(self, i: int) -> None:
        """Record the leaving row's token times up to the last step applied."""
        self.close_streak(i, self.ends.count)

    def close_streak(self, i: int, stop: int) -> None:
        """Copy row i's token times up to step `stop` (exclusive) to its SimRequest and end its streak."""
        first = int(self.streak[i])
        if first >= 0:
            if stop > first:
                self.requests[i].token_times.append(self.ends.between(first, stop))
            self.streak[i] = -1
