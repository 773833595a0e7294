"""Dynamic micro-batching: questions from concurrent requests share forward passes.

One worker runs one batch at a time in a backend thread; whatever is queued meanwhile forms the next batch (up to
`max_batch` questions). When the queue holds less than a full batch but more requests are already being read
(`arriving`), the worker waits up to `max_wait_ms` for them; a lone request never waits. Since backends answer each
item on its own, batch composition changes no answer.

Back-pressure: at most `max_queue` questions wait; beyond that `submit` raises OverloadedError with a Retry-After
from the measured time per question. A cancelled submission (its client went away) is dropped before its batch is
formed, or its results are discarded; no other request is affected. If a batch fails, its jobs are retried one by
one so that only the job at fault gets the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from jevserve.decide.base import DecisionBackend, DecisionItem
from jevserve.protocol import OverloadedError

BatchObserver = Callable[[int, float], None]  # (questions in the batch, seconds it took)


@dataclass
class _Job:
    items: Sequence[DecisionItem]
    future: asyncio.Future


class Batcher:
    """Groups submitted items into backend batches; one instance per backend, bound to one event loop."""

    def __init__(
        self,
        backend: DecisionBackend,
        *,
        max_batch: int = 64,
        max_wait_ms: float = 2.0,
        max_queue: int = 2048,
        on_batch: BatchObserver | None = None,
        arriving: Callable[[], int] = lambda: 0,
    ) -> None:
        if max_batch < 1 or max_queue < 1 or max_wait_ms < 0:
            raise ValueError(
                f"need max_batch >= 1, max_queue >= 1, max_wait_ms >= 0; got {max_batch}, {max_queue}, {max_wait_ms}"
            )
        self.backend = backend
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.on_batch = on_batch
        self.arriving = arriving  # how many requests were received but not yet submitted (told by the server)
        self._jobs: deque[_Job] = deque()
        self._queued_items = 0
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decide")
        self._seconds_per_item = 0.01  # running estimate, for Retry-After

    @property
    def queue_depth(self) -> int:
        """Questions waiting for a batch."""
        return self._queued_items

    def start(self) -> None:
        """Start the worker on the running event loop."""
        if self._worker is None:
            self._wakeup = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="batcher")

    async def close(self) -> None:
        """Stop the worker, fail what is still queued and release the backend thread."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        while self._jobs:
            job = self._jobs.popleft()
            if not job.future.done():
                job.future.set_exception(RuntimeError("server is shutting down"))
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def submit(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """Queue `items` and wait for their probabilities; raises OverloadedError when the queue is full."""
        if self._worker is None:
            self.start()
        if self._queued_items + len(items) > self.max_queue and self._queued_items > 0:
            retry = max(1.0, self._queued_items * self._seconds_per_item)
            raise OverloadedError(
                f"decision queue is full ({self._queued_items} questions waiting, limit {self.max_queue}); retry later",
                retry_after_s=retry,
            )
        job = _Job(items, asyncio.get_running_loop().create_future())
        self._jobs.append(job)
        self._queued_items += len(items)
        self._wakeup.set()
        return await job.future

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._jobs:
                await self._maybe_wait_for_more()
                batch = self._take_batch()
                if batch:
                    await self._execute(loop, batch)

    async def _maybe_wait_for_more(self) -> None:
        deadline = time.perf_counter() + self.max_wait_s
        while self.arriving() > 0 and self._queued_items < self.max_batch:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except TimeoutError:
                return

    def _take_batch(self) -> list[_Job]:
        batch: list[_Job] = []
        size = 0
        while self._jobs:
            job = self._jobs[0]
            if job.future.cancelled():  # the client left: its questions are never computed
                self._jobs.popleft()
                self._queued_items -= len(job.items)
                continue
            if batch and size + len(job.items) > self.max_batch:
                break
            self._jobs.popleft()
            self._queued_items -= len(job.items)
            batch.append(job)
            size += len(job.items)
        return batch

    async def _execute(self, loop: asyncio.AbstractEventLoop, batch: list[_Job]) -> None:
        items = [item for job in batch for item in job.items]
        started = time.perf_counter()
        try:
            results = await loop.run_in_executor(self._executor, self.backend.decide, items)
        except Exception as exc:
            if len(batch) == 1:
                _resolve(batch[0].future, exc=exc)
                return
            for job in batch:  # isolate the job at fault
                await self._execute(loop, [job])
            return
        elapsed = time.perf_counter() - started
        self._seconds_per_item = 0.8 * self._seconds_per_item + 0.2 * (elapsed / max(1, len(items)))
        if self.on_batch is not None:
            self.on_batch(len(items), elapsed)
        offset = 0
        for job in batch:
            _resolve(job.future, value=results[offset : offset + len(job.items)])
            offset += len(job.items)


def _resolve(future: asyncio.Future, *, value: object = None, exc: BaseException | None = None) -> None:
    if future.done():  # cancelled while its batch ran: the result is discarded
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(value)
