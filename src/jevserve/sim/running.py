"""The running batch of one engine as numpy arrays, so a step's bookkeeping costs a few array operations
instead of a Python loop over every running request.

Row i holds the i-th running request in admission order. While a request runs, its progress lives here and its
`SimRequest` fields are stale; `sync` writes them back, and every way out of the batch (preemption, finish)
syncs first. Token times are kept the same way: the engine records the end of every step once (`StepEnds`),
and a request only notes the step where its current run of consecutive tokens began (`streak`); the times are
copied to `SimRequest.token_times` when the run breaks (it was left out of a step, preempted or finished).
"""

from __future__ import annotations

import numpy as np

from jevserve.serving.types import Request
from jevserve.sim.entities import SimRequest

_INT_FIELDS = ("prompt", "output", "computed", "generated", "blocks", "scheduled", "streak")
_COLUMNS = (*_INT_FIELDS, "predicted")  # `predicted`: float64, NaN for a request without a prediction


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

    def between(self, first: int, stop: int) -> np.ndarray:
        """A copy of the ends of steps first .. stop - 1."""
        return self._ends[first:stop].copy()


class RunningBatch:
    """Running requests in admission order with their progress as arrays (one row per request).

    Columns: prompt and output (true reply) lengths, computed tokens (KV in the cache), generated tokens, KV
    blocks held, tokens scheduled in the step being built or in flight, the predicted reply length (NaN when
    none; for snapshots), and `streak`: the index in `StepEnds` of
    the step from which the request has had a token at every step (-1 when it is not decoding).
    """

    def __init__(self, ends: StepEnds) -> None:
        self.ends = ends
        self.requests: list[SimRequest] = []
        self.specs: list[Request] = []  # the requests' specs, kept alongside for the queue policy's victim()
        self.n = 0
        capacity = 64
        for name in _INT_FIELDS:
            setattr(self, name, np.zeros(capacity, dtype=np.int64))
        self.predicted = np.zeros(capacity, dtype=np.float64)

    def __len__(self) -> int:
        return self.n

    def append(self, request: SimRequest, num_scheduled: int) -> None:
        """Add a request admitted with `num_scheduled` tokens in the step being built."""
        i = self.n
        if i == self.prompt.size:
            for name in _COLUMNS:
                column = getattr(self, name)
                grown = np.zeros(2 * column.size, dtype=column.dtype)
                grown[:i] = column[:i]
                setattr(self, name, grown)
        self.prompt[i] = request.spec.num_prompt_tokens
        self.output[i] = request.num_output_tokens
        self.computed[i] = request.num_computed
        self.generated[i] = request.num_generated
        self.blocks[i] = request.num_blocks
        self.scheduled[i] = num_scheduled
        self.streak[i] = -1
        guess = request.spec.predicted_output_tokens
        self.predicted[i] = np.nan if guess is None else guess
        self.requests.append(request)
        self.specs.append(request.spec)
        self.n = i + 1

    def sync(self, i: int) -> SimRequest:
        """Write row i's progress back to its SimRequest, and return it."""
        request = self.requests[i]
        request.num_computed = int(self.computed[i])
        request.num_generated = int(self.generated[i])
        request.num_blocks = int(self.blocks[i])
        return request

    def close_streak(self, i: int, stop: int) -> None:
        """Copy row i's token times up to step `stop` (exclusive) to its SimRequest and end its streak."""
        first = int(self.streak[i])
        if first >= 0:
            if stop > first:
                self.requests[i].token_times.append(self.ends.between(first, stop))
            self.streak[i] = -1

    def pop(self, i: int) -> SimRequest:
        """Remove row i (its token times recorded and fields synced); later rows move up one."""
        self.close_streak(i, self.ends.count)
        request = self.sync(i)
        n = self.n
        for name in _COLUMNS:
            column = getattr(self, name)
            column[i : n - 1] = column[i + 1 : n]
        del self.requests[i]
        del self.specs[i]
        self.n = n - 1
        return request

    def remove(self, rows: np.ndarray) -> list[SimRequest]:
        """Remove the given rows (ascending indices, token times recorded and fields synced); returns their
        requests in row order."""
        if rows.size == 1:
            return [self.pop(int(rows[0]))]
        removed = []
        for i in rows.tolist():
            self.close_streak(i, self.ends.count)
            removed.append(self.sync(i))
        n = self.n
        keep = np.ones(n, dtype=bool)
        keep[rows] = False
        kept = int(keep.sum())
        for name in _COLUMNS:
            column = getattr(self, name)
            column[:kept] = column[:n][keep]
        gone = set(rows.tolist())
        self.requests = [r for i, r in enumerate(self.requests) if i not in gone]
        self.specs = [s for i, s in enumerate(self.specs) if i not in gone]
        self.n = kept
        return removed
