"""Dynamic micro-batching with fair chunking: questions from concurrent requests share forward passes.

One worker runs one batch at a time in a backend thread; whatever is queued meanwhile forms the next batch (up to
`max_batch` questions). When the queue holds less than a full batch but more requests are already being read
(`arriving`), the worker waits up to `max_wait_ms` for them; a lone request never waits. Since backends answer each
item on its own, batch composition changes no answer.

Order: a request larger than `max_batch` is run in chunks of at most `max_batch` questions, and each batch is
filled from the requests with the fewest questions left (ties: first come, first served): shortest remaining work
first, which gives the lowest mean time to answer. A small request waits for at most the chunk that is running,
whatever large requests are queued (a batch never mixes requests not yet started with the continuation of started
ones), and equal requests that arrive together are answered one after another rather than all at the end: served in
turns, ten 200-question requests all finished together after the time of ten, past every client's timeout.
With `max_chunk_ms`, a batch is also cut to the number of questions the backend answers in about that time (by
the measured time per question), so "one chunk" is short even when `max_batch` is large; a backend that batches
well (a GPU) has a small time per question and keeps its large batches. The time per question is the batches'
seconds over their questions, each batch weighted by its questions and forgotten with a half-life of
`TIMING_HALF_LIFE_ITEMS` questions: one slow batch of a few questions cannot multiply the estimate (and with it
every Retry-After and time budget), as a per-batch running mean let it.

Long texts: a request that has the backend read much text (255 options of a page each: a minute of encoding on 2
cores, in one question no batch can cut; a long pasted document) has those texts read first, in turns of about
`max_chunk_ms` (the backend's `prepare`) that alternate with other requests' batches, and its questions are batched
once nothing is left to read: a small request then waits for one such turn, not for the whole reading. The texts
are read exactly as a batch reads them, so no answer changes.

Back-pressure: a request is refused with OverloadedError (429 + Retry-After) when the work that would run before it
finishes, `n + sum(min(remaining_j, n))` over queued requests j for a request of n questions, is over `max_queue`;
so a small request is not refused because a large one is queued, and a large one is refused while another is.
Its Retry-After counts the clients refused before it, which come back too: the batcher keeps when the work ahead and
the work already told to come back will be done, and tells a refused request to come back when what is left of it,
with its own questions, fits `max_queue` again (deterministic; no jitter).
A cancelled submission (its client went away) is dropped before its next chunk is formed, or its results are
discarded; no other request is affected. If a batch fails, each request's chunk in it is retried alone so that only
the request at fault gets the error.

Deadline: a caller that passes `budget_s` (the gateway's decision timeout) has its request turned away with
DeadlineUnreachable, before it is queued, when the work queued before it and its own would take longer than
ADMISSION_HEADROOM of the budget (expected_wait_s: work in units per text read, work_units, at the measured seconds
per unit). Checked and queued in one step, so requests arriving together are each judged against those before them.
A request whose own work alone would take longer is queued all the same behind a short queue (RUN_ANYWAY_AHEAD):
turned away, it would be at every retry; run, its texts are read and kept for the retry.

Answer time: with `answer_within_s` (the decision server's `--answer-within-s`, off by default), a request is also
refused with OverloadedError when work is queued or running before it and the estimate says its answer would come
later than that, for clients that would rather be told at once than wait. Its Retry-After comes from the same
promises as a full queue's: the time when what is left before it, with its own work, fits the limit again. An
empty queue admits any request.

Backends that declare `concurrent = True` (a remote endpoint) bypass the queue: each submission is its own
`decide_async` call, concurrently, bounded by the backend itself and by `max_queue` questions in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from jevserve.decide.base import DecisionBackend, DecisionItem, Decisions
from jevserve.protocol import OverloadedError

BatchObserver = Callable[[int, float], None]  # (questions in the batch, seconds it took)

TIMING_HALF_LIFE_ITEMS = 256  # questions after which a batch's timing counts half in the time per question
# Work, for the deadline estimate (expected_wait_s): an encoder backend reads each distinct state of a batch once, at
# a cost that grows with its length up to what the encoder reads, and each question about it cheaply, so a request's
# questions are a poor measure of its work (ten questions about one text cost little more than one). A state counts
# 1 unit plus one per STATE_UNIT_CHARS characters, up to MAX_STATE_UNITS (about the 512 word pieces read), and each
# question QUESTION_UNITS; the seconds per unit are measured on the batches run, as the seconds per question are.
STATE_UNIT_CHARS = 256
MAX_STATE_UNITS = 8.0
QUESTION_UNITS = 0.05
TIMING_HALF_LIFE_UNITS = 200.0
# The share of a caller's deadline the estimated work may fill. The estimate leaves out where batches break and the
# CPU the caller's other work takes, but a stricter share turns away requests that would have been answered: with
# 16 long requests kept in flight (a new one as each ends), 0.8 answered 71 of 120 jailbreak texts in time, the
# whole deadline 94, and no admission 93; a burst sent at once gets more answered at 1.0 as well.
ADMISSION_HEADROOM = 1.0
# How the estimate is corrected by what admitted requests took: each answered one moves the scale a tenth of the way
# to its actual over estimated wait, within MIN_SCALE..MAX_SCALE (an estimate under MIN_LEARNED_ESTIMATE_S says too
# little). Only down: 64 texts of 300 characters at once were estimated at about 1.4 times what they took, while
# scaling up from requests that missed their deadline (timed when the worker next looked, late) overshot and turned
# away long texts that would have been answered (17 of 48 answered in bursts of 16 instead of 30).
SCALE_WEIGHT = 0.1
MIN_SCALE, MAX_SCALE = 0.25, 1.0
MIN_LEARNED_ESTIMATE_S = 0.02
# Questions whose own work alone outlasts their deadline are queued all the same while the work ahead of them is
# at most this share of it (`Batcher._run_anyway`); behind a longer queue they are turned away like any others.
RUN_ANYWAY_AHEAD = 0.5


# A batch's time budget by default (`max_chunk_ms`): what the backend answers in about this time, so a small request
# waits for at most about this long behind a large one (see the module docstring). The decision server and the
# gateway's embedded decider both use it.
DEFAULT_MAX_CHUNK_MS = 25.0
# Answers kept for the retry of questions whose caller left before they were done (`Batcher._run_anyway`): a
# probability vector each, so about 1 MB for a thousand questions of three options.
KEPT_ANSWERS = 4096
# The longest Retry-After told: typesafe-sdk gives up at once on a hint of 30 s or more (its retry budget is 30 s), so
# a longer estimate would turn a wait into a failure; a client told 29 s and still early is told again.
MAX_RETRY_AFTER_S = 29.0
# A request whose distinct texts (states, instructions, options) are longer than this is read in turns before its
# questions are batched (see the module docstring): about 1,000 word pieces of English, a tenth of a second of
# encoding on 2 cores. At 16,384, a dozen requests of 15 KB each, just under it, were read within batches, and a
# small request waited behind all of them for 8 to 15 s.
PREPARED_TEXT_CHARS = 4_096


class DeadlineUnreachable(Exception):
    """Questions refused before queueing: the work ahead of them and theirs would outlast the caller's deadline.
    `retry_after_s`: about when the work ahead of them is done (at least 1 s, at most MAX_RETRY_AFTER_S)."""

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def work_units(items: Sequence[DecisionItem], in_context: bool = False, counted: set[str] | None = None) -> float:
    """The work of answering `items` in one batch, in the units above; with `in_context` (a backend that reads a
    window from its text's pass), a window read within a text costs that text's pass, counted once, not its own.
    With `counted`, the states already counted for work queued ahead cost nothing more (read in the same batch, or
    once before: requests about one shared document, each with its own question, read the document once), and the
    states counted here are added to it."""
    states = {(item.within or item.state) if in_context else item.state for item in items}
    if counted is not None:
        new = states - counted
        counted |= states
        states = new
    return sum(1 + min(len(s) / STATE_UNIT_CHARS, MAX_STATE_UNITS) for s in states) + QUESTION_UNITS * len(items)
_now: Callable[[], float] = time.monotonic  # the clock of Retry-After promises; a module attribute that tests can set


@dataclass(eq=False)
class _Job:
    items: Sequence[DecisionItem]
    future: asyncio.Future
    seq: int  # arrival order, the tie-break among requests served equally
    taken: int = 0  # items handed to the backend so far (the service the request has attained)
    done: int = 0  # items whose results are back
    results: list[np.ndarray | None] = field(default_factory=list)
    estimate_s: float | None = None  # the wait estimated when it was admitted (unscaled), to correct the estimator
    submitted: float = 0.0  # perf_counter at submission
    unprepared: bool = False  # its texts are still being read in turns (`Batcher._prepare`)

    @property
    def remaining(self) -> int:
        return len(self.items) - self.taken


@dataclass(frozen=True, slots=True)
class _Chunk:
    job: _Job
    start: int
    stop: int


class Batcher:
    """Groups submitted items into backend batches; one instance per backend, bound to one event loop."""

    def __init__(
        self,
        backend: DecisionBackend,
        *,
        max_batch: int = 64,
        max_wait_ms: float = 2.0,
        max_queue: int = 2048,
        max_chunk_ms: float | None = None,
        on_batch: BatchObserver | None = None,
        arriving: Callable[[], int] = lambda: 0,
        answer_within_s: float | None = None,
    ) -> None:
        if max_batch < 1 or max_queue < 1 or max_wait_ms < 0 or (max_chunk_ms is not None and max_chunk_ms <= 0):
            raise ValueError(
                f"need max_batch >= 1, max_queue >= 1, max_wait_ms >= 0, max_chunk_ms > 0 or None; got {max_batch}, "
                f"{max_queue}, {max_wait_ms}, {max_chunk_ms}"
            )
        if answer_within_s is not None and answer_within_s <= 0:
            raise ValueError(f"need answer_within_s > 0 or None; got {answer_within_s}")
        self.answer_within_s = answer_within_s
        self.backend = backend
        self._in_context = getattr(backend, "reads_windows_in_context", False)  # for work_units
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.max_chunk_s = None if max_chunk_ms is None else max_chunk_ms / 1000.0
        self.on_batch = on_batch
        self.arriving = arriving  # how many requests were received but not yet submitted (told by the server)
        self._jobs: list[_Job] = []
        self._seq = itertools.count()
        self._queued_items = 0
        self._in_flight = 0  # concurrent backends: questions being answered
        self._wakeup: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="decide")
        self._seconds_per_item = 0.01  # estimate, for Retry-After and the time budget (see the module docstring)
        self._timed_seconds = 0.0  # decayed sums of the batches' seconds and questions the estimate is made of
        self._timed_items = 0.0
        self._measured = False  # no time budget before the first batch has been timed
        self._seconds_per_unit = 0.0  # the same per unit of work (work_units), for the deadline estimate
        self._timed_unit_seconds = 0.0
        self._timed_units = 0.0
        self._running: tuple[float, float] | None = None  # the batch under way: its work units and perf_counter start
        self._running_items = 0  # the questions of the batch under way
        # actual over estimated waits of admitted requests, decayed: what the units leave out (batches of many short
        # texts run faster per unit than a few long ones; other work on the machine slows every batch)
        self._estimate_scale = 1.0
        self._promised_until = 0.0  # on `_now()`'s clock: when the work of the clients already refused should be done
        # answers of questions run past their caller's deadline (`_run_anyway`), finished after it left: its retry
        # is answered from them
        self._kept: OrderedDict[DecisionItem, np.ndarray] = OrderedDict()

    @property
    def running(self) -> int:
        """Questions in the batch the backend is answering now (0 for a concurrent backend: see queue_depth)."""
        return self._running_items

    @property
    def queue_depth(self) -> int:
        """Questions waiting for a batch (for a concurrent backend: questions in flight)."""
        return self._queued_items + self._in_flight

    def start(self) -> None:
        """Start the worker on the running event loop."""
        if self._worker is None:
            self._wakeup = asyncio.Event()
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="batcher")

    async def warm_up(self, items: Sequence[DecisionItem], timed: Sequence[DecisionItem] = ()) -> None:
        """Before any request: answer `items` once untimed, then `timed` (the same questions about other texts) as
        the first timed batch. A backend's first batch pays its one-off start, and each question's first asking its
        encoding (the gateway's four request questions: 44 ms for a batch that takes 5 ms after): timed, that made
        every deadline estimate several times too long for hundreds of questions, turning away bursts the decider
        answers in time. With no timed batch, though, nothing is estimated until a request's batch has run, and a
        burst arriving at once is all admitted, however long it takes. `timed` holds texts of its own: one already
        read would come from the backend's cache, in a fraction of its time. Best effort: a backend that fails here
        fails the requests that follow, which say so."""
        if getattr(self.backend, "concurrent", False) or not items:
            return  # a remote endpoint: nothing here to warm, and no queue whose estimate it would spoil
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await loop.run_in_executor(self._executor, self.backend.decide, list(items))
            if timed:
                started = time.perf_counter()
                await loop.run_in_executor(self._executor, self.backend.decide, list(timed))
                self._time_batch(len(timed), work_units(timed, self._in_context), time.perf_counter() - started)

    async def close(self) -> None:
        """Stop the worker, fail what is still queued and release the backend thread."""
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None
        for job in self._jobs:
            if not job.future.done():
                job.future.set_exception(RuntimeError("server is shutting down"))
        self._jobs.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)
        aclose = getattr(self.backend, "aclose", None)
        if aclose is not None:  # a concurrent backend's connection pool belongs to this event loop
            await aclose()

    def check_room(self, num_items: int) -> None:
        """Raise OverloadedError now if a request of `num_items` questions would be refused (before preparing it)."""
        if getattr(self.backend, "concurrent", False):
            if self._in_flight > 0 and self._in_flight + num_items > self.max_queue:
                self._refuse(self._in_flight, num_items)
            return
        ahead = sum(min(job.remaining, num_items) for job in self._jobs)
        if ahead > 0 and ahead + num_items > self.max_queue:
            self._refuse(ahead, num_items)

    def expected_wait_s(self, items: Sequence[DecisionItem]) -> float | None:
        """About how long `items` submitted now would take to be answered: the estimate from the work queued
        (_raw_wait_s), scaled by how long admitted requests have actually taken against their estimates."""
        raw = self._raw_wait_s(items)
        return None if raw is None else raw * self._estimate_scale

    def _raw_wait_s(self, items: Sequence[DecisionItem]) -> float | None:
        """In measured seconds per unit of work (work_units): the batch running, then the work served before them in
        the batcher's order (a queued request with fewer questions left goes first; one with more shares with them up
        to their number), then theirs. None before any batch has been timed, and for a concurrent backend (it keeps
        no queue here)."""
        parts = self._raw_wait_parts(items)
        return None if parts is None else sum(parts)

    def _raw_wait_parts(self, items: Sequence[DecisionItem]) -> tuple[float, float] | None:
        """_raw_wait_s as (the work before `items`, their own), their own less the states read ahead of them."""
        if not self._measured or getattr(self.backend, "concurrent", False):
            return None
        n = len(items)
        work, counted = 0.0, self._read_already([(job, job.taken) for job in self._jobs])
        for job in self._jobs:  # what is queued (a request wholly taken into the running batch is no longer here)
            left = job.items[job.taken :]
            if left and not job.future.done():
                work += work_units(left, self._in_context, counted) * min(len(left), n) / len(left)
        own = work_units(items, self._in_context, counted)
        running = 0.0
        if self._running is not None:  # what is left of the batch under way, by its work and how long it has run
            units, started = self._running
            running = max(0.0, units * self._seconds_per_unit - (time.perf_counter() - started))
        return running + work * self._seconds_per_unit, own * self._seconds_per_unit

    async def submit(self, items: Sequence[DecisionItem], budget_s: float | None = None) -> list[np.ndarray]:
        """Queue `items` and wait for their probabilities; raises OverloadedError when the queue is full, and, with
        `budget_s`, DeadlineUnreachable when the work before them and theirs would take longer (expected_wait_s)."""
        return (await self.decide(items, budget_s)).probabilities

    async def decide(self, items: Sequence[DecisionItem], budget_s: float | None = None) -> Decisions:
        """Like `submit`, with the backend's own token count when it has one (a remote endpoint's usage)."""
        if getattr(self.backend, "concurrent", False):
            return await self._decide_concurrently(items)
        if self._worker is None:
            self.start()
        if items and all(item in self._kept for item in items):
            return Decisions([self._kept[item] for item in items])
        self.check_room(len(items))
        estimate, run_anyway = None, False
        # checked and queued in one step: a request arriving next sees this one queued
        if budget_s is not None:
            parts = self._raw_wait_parts(items)
            estimate = None if parts is None else sum(parts)
            wait = None if estimate is None else estimate * self._estimate_scale
            if wait is not None and wait > ADMISSION_HEADROOM * budget_s:
                run_anyway = self._run_anyway(parts, budget_s)
                if not run_anyway:
                    ahead_s = parts[0] * self._estimate_scale
                    raise DeadlineUnreachable(
                        f"about {wait * 1000:.0f} ms of work is queued before these questions' answers, over the "
                        f"{budget_s * 1000:.0f} ms they are wanted in",
                        retry_after_s=min(MAX_RETRY_AFTER_S, max(1.0, ahead_s)),
                    )
        elif self.answer_within_s is not None:
            parts = self._raw_wait_parts(items)
            if parts is not None:
                estimate = sum(parts)
                self._check_answer_time(parts[0] * self._estimate_scale, parts[1] * self._estimate_scale)
        if not items:
            return Decisions([])
        job = _Job(items, asyncio.get_running_loop().create_future(), next(self._seq), results=[None] * len(items),
                   estimate_s=estimate, submitted=time.perf_counter(),
                   unprepared=self.max_chunk_s is not None
                   and self.backend.text_chars(items) > PREPARED_TEXT_CHARS)
        self._jobs.append(job)
        self._queued_items += len(items)
        self._wakeup.set()
        if not run_anyway:
            return Decisions(await job.future)
        try:  # its caller's deadline passes first: the work goes on, and the answers wait for the retry
            return Decisions(await asyncio.shield(job.future))
        except asyncio.CancelledError:
            job.future.add_done_callback(lambda done: self._keep(job, done))
            raise

    def _keep(self, job: _Job, done: asyncio.Future) -> None:
        if not done.cancelled() and done.exception() is None:
            for item, answer in zip(job.items, done.result(), strict=True):
                self._kept[item] = answer
                self._kept.move_to_end(item)
            while len(self._kept) > KEPT_ANSWERS:
                self._kept.popitem(last=False)

    def _run_anyway(self, parts: tuple[float, float], budget_s: float) -> bool:
        """Whether questions past their deadline are queued all the same: their own work alone outlasts it, and the
        work ahead of them is short. Turned away, such questions were turned away at every retry (an agent step with
        six tool results, on an idle gateway). Run, they are run to the end after their caller has left, and their
        answers are kept: a retry while they run is turned away, told to come back when they are done (the work
        ahead), and one after is answered from them. (What they read alone was not enough: the reader keeps 64
        texts' token states, and a step of a hundred tool results was read anew, and cut off, at every retry.)"""
        ahead, own = (part * self._estimate_scale for part in parts)
        return own > ADMISSION_HEADROOM * budget_s and ahead <= RUN_ANYWAY_AHEAD * budget_s

    def _check_answer_time(self, ahead_s: float, own_s: float) -> None:
        """OverloadedError when work is ahead (`ahead_s`) and the answer, after that and the request's own work
        (`own_s`), would come later than `answer_within_s`; told to come back when what is left ahead, with its own
        work, fits it."""
        wait_s = ahead_s + own_s
        if ahead_s <= 1e-9 or wait_s <= self.answer_within_s:
            return
        now = _now()
        self._promised_until = max(now + ahead_s, self._promised_until) + own_s
        retry_at = max(now, self._promised_until - self.answer_within_s)
        raise OverloadedError(
            f"the questions queued before this request would take about {ahead_s:.3g} s, so its answer would come "
            f"after about {wait_s:.3g} s, over the {self.answer_within_s:g} s this server answers within "
            "(--answer-within-s); retry later",
            retry_after_s=min(MAX_RETRY_AFTER_S, max(1.0, retry_at - now)),
        )

    def _refuse(self, ahead: int, num_items: int) -> None:
        # The work ahead alone cannot see the other clients refused at the same moment, which all come back when told:
        # told the same time, they collide again and most are refused again. So the batcher keeps when the work ahead
        # and the work of the clients already refused will be done (`_promised_until`), adds this request's own, and
        # tells it to come back when what is left by then fits `max_queue`: it is admitted then if the time per
        # question holds, and the queue stays full meanwhile (told to come back only when the queue is empty, clients
        # of a burst left the server idle between them). Once the promises have passed, only the work ahead counts.
        now = _now()
        spq = self._queued_seconds_per_item()
        self._promised_until = max(now + ahead * spq, self._promised_until) + num_items * spq
        retry_at = max(now, self._promised_until - self.max_queue * spq)
        raise OverloadedError(
            f"decision queue is full ({self._queued_items + self._in_flight} questions waiting, {ahead} of them "
            f"ahead of this request, which asks {num_items}: {ahead + num_items} in all, over the limit of "
            f"{self.max_queue}); retry later",
            # at least 1 s, in retry-after-ms too: told a few milliseconds, clients came back before the time per
            # question they were sized on had held and were refused again (more tries, no sooner served)
            retry_after_s=min(MAX_RETRY_AFTER_S, max(1.0, retry_at - now)),
        )

    def _queued_seconds_per_item(self) -> float:
        """The seconds a question of the work queued now takes: its texts' work units (work_units, a text shared by
        several questions read once) at the measured seconds per unit, over its questions. The batches' own time
        per question says what the questions timed before cost, not these: after requests of 32 questions about
        one short text it was 0.38 ms, where this one is 2.3 ms for a burst of requests of 8 questions about a
        600-character text each. (Those requests took 4.8 ms a question to serve: reading and parsing them shares
        the cores with the model, and the retry hints leave that out.)"""
        if not self._measured or self._seconds_per_unit <= 0:
            return self._seconds_per_item  # a concurrent backend's, or nothing timed yet
        queued = [item for job in self._jobs if not job.future.done() for item in job.items[job.taken :]]
        if not queued:
            return self._seconds_per_item
        units = work_units(queued, self._in_context, self._read_already([(job, job.taken) for job in self._jobs]))
        return units * self._seconds_per_unit * self._estimate_scale / len(queued)

    def _read_already(self, jobs: Sequence[tuple[_Job, int]]) -> set[str]:
        """The texts the first `upto` questions of each (job, upto) read, in chunks already handed out. An encoder
        backend keeps what it read (its state cache), so a later chunk of the same request pays for its questions
        only: charged its text again, the short chunks `max_chunk_ms` cuts (about one question each) taught a time
        per unit several times too low, and a burst's retry hints came out that much too short."""
        return {(item.within or item.state) if self._in_context else item.state
                for job, upto in jobs for item in job.items[:upto]}

    async def _decide_concurrently(self, items: Sequence[DecisionItem]) -> Decisions:
        self.check_room(len(items))
        self._in_flight += len(items)
        started = time.perf_counter()
        try:
            decided = await self.backend.decide_async(items)
        finally:
            self._in_flight -= len(items)
        if self.on_batch is not None:
            self.on_batch(len(items), time.perf_counter() - started)
        return decided

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            prepared_last = False
            while self._jobs:
                await self._maybe_wait_for_more()
                self._drop_cancelled()
                unprepared = next((job for job in self._jobs if job.unprepared), None)
                # a turn of reading a request's long texts, then a batch of the requests ready, in alternation
                if unprepared is not None and (not prepared_last or all(job.unprepared for job in self._jobs)):
                    await self._prepare(loop, unprepared)
                    prepared_last = True
                    continue
                prepared_last = False
                batch = self._take_batch()
                if batch:
                    await self._execute(loop, batch)
            # The queue ran dry before the promises were due: the clients told to come back are late or gone (or the
            # backend beat the time per question they were sized on), so the next refusal counts only what is queued.
            self._promised_until = min(self._promised_until, _now())

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

    def _drop_cancelled(self) -> None:
        kept = []
        for job in self._jobs:
            if job.future.done():  # the client left (or the job failed): its remaining questions are never computed
                self._queued_items -= job.remaining
            else:
                kept.append(job)
        self._jobs = kept

    def _learn_wait(self, job: _Job) -> None:
        """Move the estimate's scale towards this job's actual over estimated wait."""
        if job.estimate_s is None or job.estimate_s < MIN_LEARNED_ESTIMATE_S:
            return
        job.estimate_s, ratio = None, (time.perf_counter() - job.submitted) / job.estimate_s
        scale = (1 - SCALE_WEIGHT) * self._estimate_scale + SCALE_WEIGHT * ratio
        self._estimate_scale = min(MAX_SCALE, max(MIN_SCALE, scale))

    def _time_batch(self, num_items: int, units: float, elapsed: float) -> None:
        """Learn a batch's time: the decayed seconds per question and per unit of work."""
        keep = 0.5 ** (num_items / TIMING_HALF_LIFE_ITEMS)
        self._timed_seconds = keep * self._timed_seconds + elapsed
        self._timed_items = keep * self._timed_items + num_items
        self._seconds_per_item = self._timed_seconds / self._timed_items
        keep = 0.5 ** (units / TIMING_HALF_LIFE_UNITS)
        self._timed_unit_seconds = keep * self._timed_unit_seconds + elapsed
        self._timed_units = keep * self._timed_units + units
        self._seconds_per_unit = self._timed_unit_seconds / self._timed_units
        self._measured = True

    def _take_batch(self) -> list[_Chunk]:
        self._drop_cancelled()
        chunks: list[_Chunk] = []
        budget = self.max_batch
        if self.max_chunk_s is not None and self._measured:
            budget = max(1, min(budget, int(self.max_chunk_s / self._seconds_per_item)))
        for job in sorted(self._jobs, key=lambda j: (j.remaining, j.seq)):
            if budget == 0 or (chunks and chunks[0].start == 0 and job.taken > 0):
                break  # full, or new requests are in this batch and this one has started: it waits one batch
            if job.remaining == 0 or job.unprepared:
                continue
            n = min(job.remaining, budget)
            chunks.append(_Chunk(job, job.taken, job.taken + n))
            job.taken += n
            budget -= n
            self._queued_items -= n
        self._jobs = [job for job in self._jobs if job.remaining > 0]
        return chunks

    async def _prepare(self, loop: asyncio.AbstractEventLoop, job: _Job) -> None:
        """One turn of reading `job`'s texts; the job is batched once they are all read."""
        # its questions show as running (/healthz): the model is busy with them, as in a batch
        self._running, self._running_items = (0.0, time.perf_counter()), len(job.items)
        try:
            job.unprepared = not await loop.run_in_executor(
                self._executor, self.backend.prepare, job.items, self.max_chunk_s)
        except Exception as exc:  # only this request's texts were read: only it fails
            _fail(job, exc)
        finally:
            self._running, self._running_items = None, 0

    async def _execute(self, loop: asyncio.AbstractEventLoop, batch: list[_Chunk]) -> None:
        items = [item for chunk in batch for item in chunk.job.items[chunk.start : chunk.stop]]
        started = time.perf_counter()
        units = work_units(items, self._in_context, self._read_already([(c.job, c.start) for c in batch]))
        self._running, self._running_items = (units, started), len(items)
        try:
            results = await loop.run_in_executor(self._executor, self.backend.decide, items)
            if len(results) != len(items):
                raise ValueError(f"backend returned {len(results)} probability vectors for {len(items)} questions")
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0].job, exc)
                return
            for chunk in batch:  # isolate the request at fault
                if not chunk.job.future.done():
                    await self._execute(loop, [chunk])
            return
        finally:
            self._running, self._running_items = None, 0
        elapsed = time.perf_counter() - started
        self._time_batch(len(items), units, elapsed)
        if self.on_batch is not None:
            self.on_batch(len(items), elapsed)
        offset = 0
        for chunk in batch:
            job, n = chunk.job, chunk.stop - chunk.start
            job.results[chunk.start : chunk.stop] = results[offset : offset + n]
            job.done += n
            offset += n
            if job.done == len(job.items) and not job.future.done():
                job.future.set_result(job.results)
                self._learn_wait(job)


def _fail(job: _Job, exc: BaseException) -> None:
    if not job.future.done():  # cancelled while its chunk ran: the error is discarded
        job.future.set_exception(exc)
