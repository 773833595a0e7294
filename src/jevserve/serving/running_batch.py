"""The running batch of one engine as numpy arrays, so a step's bookkeeping costs a few array operations
instead of a Python loop over every running request.

Row i holds the i-th running request in admission order. While a request runs, its progress lives here and its
`EngineRequest` fields are stale; `sync` writes them back, and every way out of the batch (preemption, finish,
abort) syncs first. Subclasses add columns of their own (the simulator keeps token times in one) by extending
`INT_COLUMNS` and hook into `record_step` and `on_leave`.
"""

from __future__ import annotations

import numpy as np

from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.types import Request


class RunningBatch:
    """Running requests in admission order with their progress as arrays (one row per request).

    Columns: `prompt` and `output` (the reply length the request stops at), `computed` tokens (KV in the cache),
    `generated` tokens, KV `blocks` held, tokens `scheduled` in the step being planned or in flight, and
    `predicted` reply length (float, NaN when the request has none; for snapshots).

    A row may be loaded without its request object (`load`, used by the TTFT estimate, which reads hundreds of
    rows from a snapshot and preempts few of them): its `EngineRequest` is made when the row leaves the batch.
    """

    INT_COLUMNS: tuple[str, ...] = ("prompt", "output", "computed", "generated", "blocks", "scheduled")

    def __init__(self, capacity: int = 64) -> None:
        self.requests: list[EngineRequest | None] = []
        self.specs: list[Request] = []  # the requests' specs, kept alongside for the queue policy's victim()
        self.n = 0
        # The integer columns are the rows of one 2-d array, so moving rows (preemption, finishes) is one copy.
        self._bind(np.zeros((len(self.INT_COLUMNS), capacity), dtype=np.int64), np.zeros(capacity))

    def __len__(self) -> int:
        return self.n

    def _bind(self, ints: np.ndarray, predicted: np.ndarray) -> None:
        self._ints, self.predicted = ints, predicted
        for index, name in enumerate(self.INT_COLUMNS):
            setattr(self, name, ints[index])

    def _reserve(self, size: int) -> None:
        capacity = self.predicted.size
        if size > capacity:
            capacity = max(2 * capacity, size)
            ints = np.zeros((len(self.INT_COLUMNS), capacity), dtype=np.int64)
            ints[:, : self.n] = self._ints[:, : self.n]
            predicted = np.zeros(capacity)
            predicted[: self.n] = self.predicted[: self.n]
            self._bind(ints, predicted)

    def append(self, request: EngineRequest, num_scheduled: int) -> None:
        """Add a request admitted with `num_scheduled` tokens in the step being planned."""
        i = self.n
        self._reserve(i + 1)
        self.prompt[i] = request.spec.num_prompt_tokens
        self.output[i] = request.num_output_tokens
        self.computed[i] = request.num_computed
        self.generated[i] = request.num_generated
        self.blocks[i] = request.num_blocks
        self.scheduled[i] = num_scheduled
        guess = request.spec.predicted_output_tokens
        self.predicted[i] = np.nan if guess is None else guess
        self.requests.append(request)
        self.specs.append(request.spec)
        self.n = i + 1

    def load(self, specs: list[Request], **columns: np.ndarray) -> None:
        """Append rows for `specs` with their columns given as arrays (any of INT_COLUMNS and `predicted`; a
        column not given is 0); their request objects are made when they leave."""
        first, count = self.n, len(specs)
        self._reserve(first + count)
        self._ints[:, first : first + count] = 0
        self.predicted[first : first + count] = 0.0
        for name, values in columns.items():
            getattr(self, name)[first : first + count] = values
        self.requests.extend([None] * count)
        self.specs.extend(specs)
        self.n = first + count

    def sync(self, i: int) -> EngineRequest:
        """Write row i's progress back to its request (made now for a loaded row), and return it."""
        request = self.requests[i]
        if request is None:
            request = self.requests[i] = EngineRequest(self.specs[i], int(self.output[i]))
        request.num_computed = int(self.computed[i])
        request.num_generated = int(self.generated[i])
        request.num_blocks = int(self.blocks[i])
        return request

    def record_step(self, num_rows: int, sampled: np.ndarray | None, num_steps: int) -> None:
        """Hook: `num_steps` steps of the first `num_rows` rows were applied; `sampled` says which rows sampled a
        token (None: a run of decode steps, every row sampling one token per step). Finished rows leave after."""

    def on_leave(self, i: int) -> None:
        """Hook: row i is about to leave the batch (its progress is still in the arrays)."""

    def pop(self, i: int) -> EngineRequest:
        """Remove row i (synced); later rows move up one."""
        self.on_leave(i)
        request = self.sync(i)
        n = self.n
        self._ints[:, i : n - 1] = self._ints[:, i + 1 : n]
        self.predicted[i : n - 1] = self.predicted[i + 1 : n]
        del self.requests[i]
        del self.specs[i]
        self.n = n - 1
        return request

    def remove(self, rows: np.ndarray) -> list[EngineRequest]:
        """Remove the given rows (ascending indices, synced); returns their requests in row order."""
        if rows.size == 1:
            return [self.pop(int(rows[0]))]
        removed = []
        for i in rows.tolist():
            self.on_leave(i)
            removed.append(self.sync(i))
        n = self.n
        keep = np.ones(n, dtype=bool)
        keep[rows] = False
        kept = int(keep.sum())
        self._ints[:, :kept] = self._ints[:, :n][:, keep]
        self.predicted[:kept] = self.predicted[:n][keep]
        gone = set(rows.tolist())
        self.requests = [r for i, r in enumerate(self.requests) if i not in gone]
        self.specs = [s for i, s in enumerate(self.specs) if i not in gone]
        self.n = kept
        return removed
