"""One engine replica with vLLM v1 scheduling semantics, driven by events so a cluster can hold several.

Each step follows vLLM's `Scheduler.schedule()` (vllm/v1/core/sched/scheduler.py):
1. running requests first, in admission order, each given what it still needs (a prefill chunk, or one decode
   token) within the step's token budget; when one cannot get a KV block, the running request the queue policy
   ranks last is preempted (its blocks freed, its progress recomputed later), possibly the request itself;
2. then, only if nothing was preempted, waiting requests in policy order while the budget, `max_num_seqs` and
   free KV blocks allow; with head-of-line blocking (vLLM's behaviour) admission stops at the first request
   that does not fit, otherwise it skips that one and tries the next.

A step's time comes from the profile's step-time model. Steps that only decode the same batch are run in one
go (`is_decode_run`) until the first request finishes, KV could run short, or the queue could change what is
admitted; the result is the same as stepping one by one, which a test checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jevserve.serving.types import QueuePolicy, ReplicaState, ResidentRequest
from jevserve.sim.entities import Batch, SimRequest
from jevserve.sim.errors import EngineConfigError
from jevserve.sim.observer import Observer
from jevserve.sim.profile import Profile
from jevserve.sim.waiting import WaitingQueue

KV_ADMISSION_MODES = ("prompt", "chunk")
# Bump when a change alters simulated results, so cached experiment results are not reused across versions.
SIM_MODEL_VERSION = 1


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Scheduler settings; defaults are vLLM v1's for an OpenAI server on a >= 70 GiB GPU."""

    max_num_seqs: int = 1024
    max_num_batched_tokens: int = 8192  # the per-step token budget (chunked prefill)
    block_size: int = 16
    # "prompt": a waiting request is admitted only if its whole prompt fits in free KV blocks, which are then
    # reserved; "chunk": only the chunk scheduled this step must fit (vLLM v1's allocate_slots).
    kv_admission: str = "prompt"
    head_of_line_blocking: bool = True  # stop admitting at the first waiting request that does not fit
    num_kv_blocks: int | None = None  # None: from the profile's memory figures
    fast_forward: bool = True  # run identical decode steps in one go

    def __post_init__(self) -> None:
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size"):
            if getattr(self, name) < 1:
                raise EngineConfigError(f"{name}={getattr(self, name)!r}; expected an integer >= 1")
        if self.kv_admission not in KV_ADMISSION_MODES:
            raise EngineConfigError(
                f"kv_admission={self.kv_admission!r}; expected one of: {', '.join(KV_ADMISSION_MODES)}"
            )
        if self.num_kv_blocks is not None and self.num_kv_blocks < 1:
            raise EngineConfigError(f"num_kv_blocks={self.num_kv_blocks!r}; expected an integer >= 1 or None")


class Engine:
    """A replica: a waiting queue, a running batch, a paged KV cache and at most one step in flight."""

    def __init__(
        self,
        profile: Profile,
        policy: QueuePolicy,
        config: EngineConfig | None = None,
        *,
        replica_id: int = 0,
        observers: tuple[Observer, ...] = (),
    ) -> None:
        self.profile = profile
        self.policy = policy
        self.config = config or EngineConfig()
        self.replica_id = replica_id
        self.observers = tuple(observers)
        self.num_total_blocks = self.config.num_kv_blocks or profile.num_kv_blocks(self.config.block_size)
        self.num_free_blocks = self.num_total_blocks
        self.waiting = WaitingQueue(policy)
        self.running: list[SimRequest] = []
        self.batch: Batch | None = None  # the step or decode run in flight
        self.tick_pending = False
        self._num_runs = 0
        self._model = profile.step_time

    # ---- entry points used by events -------------------------------------------------------------------

    def check_fits(self, request: SimRequest) -> None:
        """Reject a request that could never run: its full context exceeds the whole KV cache."""
        if request.spec.num_output_tokens is None:
            raise EngineConfigError(
                f"request {request.spec.request_id!r}: num_output_tokens is None; the simulator needs the true "
                "reply length to know when a request ends"
            )
        need = self._blocks(request.spec.num_prompt_tokens + request.spec.num_output_tokens)
        if need > self.num_total_blocks:
            raise EngineConfigError(
                f"request {request.spec.request_id!r} needs {need} KV blocks but replica {self.replica_id} has "
                f"{self.num_total_blocks}; use a profile with more memory or drop requests this long"
            )

    def enqueue(self, request: SimRequest, now_s: float) -> float | None:
        """Queue a request. Returns a new end time for the decode run in flight when it must stop early so the
        next step can admit the request (see `_truncate_run`), else None."""
        request.enqueue_s = now_s
        request.replica_id = self.replica_id
        self.waiting.push(request, now_s)
        for o in self.observers:
            o.on_enqueue(request, now_s)
        if self.batch is not None and self.batch.is_decode_run and self._has_room():
            return self._truncate_run(now_s)
        return None

    def start_step(self, now_s: float) -> Batch | None:
        """Schedule the next step at now_s (engine idle); returns the batch in flight, or None if nothing to do."""
        self.tick_pending = False
        if self.batch is not None:
            return None
        items, preempted, admitted = self._schedule(now_s)
        while not items and preempted:
            # Everything that ran was preempted; vLLM's busy loop schedules again at once, now admitting.
            items, preempted, admitted = self._schedule(now_s)
        if not items:
            return None
        self.batch = self._make_batch(items, now_s, single=bool(preempted or admitted))
        return self.batch

    def finish_step(self, now_s: float) -> list[SimRequest]:
        """Apply the batch in flight whose last step ends at now_s; returns the requests that finished."""
        batch = self.batch
        assert batch is not None and abs(batch.end_s - now_s) <= 1e-9 * max(1.0, now_s)
        self.batch = None
        finished = self._apply_decode_run(batch) if batch.is_decode_run else self._apply_single_step(batch, now_s)
        for o in self.observers:
            o.on_step(self.replica_id, batch, len(batch.ends_s))
        for request in finished:
            self.running.remove(request)
            self.num_free_blocks += request.num_blocks
            request.num_blocks = 0
            request.finish_s = now_s
            for o in self.observers:
                o.on_finish(request, now_s)
        return finished

    @property
    def is_idle(self) -> bool:
        """True when no step is in flight."""
        return self.batch is None

    # ---- scheduling ------------------------------------------------------------------------------------

    def _blocks(self, num_tokens: int) -> int:
        return -(-num_tokens // self.config.block_size)

    def _has_room(self) -> bool:
        batch_tokens = len(self.batch.items) if self.batch is not None else 0
        return len(self.running) < self.config.max_num_seqs and batch_tokens < self.config.max_num_batched_tokens

    def _schedule(self, now_s: float) -> tuple[list[tuple[SimRequest, int]], bool, bool]:
        budget = self.config.max_num_batched_tokens
        scheduled: list[tuple[SimRequest, int]] = []
        preempted = False
        index = 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            num_new = min(request.num_tokens - request.num_computed, budget)
            need = max(0, self._blocks(request.num_computed + num_new) - request.num_blocks)
            while need > self.num_free_blocks:
                victim = self._preempt_one(now_s)
                preempted = True
                for pos, (r, n) in enumerate(scheduled):
                    if r is victim:  # it had been scheduled earlier in this step: give its tokens back
                        del scheduled[pos]
                        budget += n
                        index -= 1
                        break
                if victim is request:
                    break
            else:
                self.num_free_blocks -= need
                request.num_blocks += need
                scheduled.append((request, num_new))
                budget -= num_new
                index += 1
                continue
            break  # the request preempted itself: vLLM stops scheduling running requests here
        admitted = False
        if not preempted:
            admitted = self._admit_waiting(budget, now_s, scheduled)
        return scheduled, preempted, admitted

    def _preempt_one(self, now_s: float) -> SimRequest:
        victim = self.running.pop(self.policy.victim([r.spec for r in self.running], now_s))
        self.num_free_blocks += victim.num_blocks
        victim.num_blocks = 0
        victim.num_computed = 0
        victim.num_preemptions += 1
        self.waiting.push(victim, now_s)
        for o in self.observers:
            o.on_preempt(victim, now_s)
        return victim

    def _admit_waiting(self, budget: int, now_s: float, scheduled: list[tuple[SimRequest, int]]) -> bool:
        skipped: list[SimRequest] = []
        admitted = False
        while budget > 0 and len(self.running) < self.config.max_num_seqs:
            request = self.waiting.peek(now_s)
            if request is None:
                break
            num_new = min(request.num_tokens - request.num_computed, budget)
            reserve = request.num_tokens if self.config.kv_admission == "prompt" else num_new
            need = max(0, self._blocks(reserve) - request.num_blocks)
            if need > self.num_free_blocks:
                if self.config.head_of_line_blocking:
                    break
                skipped.append(self.waiting.pop(now_s))  # skip it so a smaller request behind can start
                continue
            self.waiting.pop(now_s)
            self.num_free_blocks -= need
            request.num_blocks += need
            self.running.append(request)
            scheduled.append((request, num_new))
            budget -= num_new
            admitted = True
            if request.first_admit_s is None:
                request.first_admit_s = now_s
            for o in self.observers:
                o.on_admit(request, now_s)
        for request in skipped:
            self.waiting.push(request, now_s)
        return admitted

    # ---- step time and fast-forward --------------------------------------------------------------------

    def _make_batch(self, items: list[tuple[SimRequest, int]], now_s: float, *, single: bool) -> Batch:
        num_prefill = num_decode = context = pairs = 0
        for request, num_new in items:
            if request.is_decoding:
                num_decode += 1
                context += request.num_tokens
            else:
                num_prefill += num_new
                pairs += num_new * (request.num_computed + num_new)
        self._num_runs += 1
        num_steps = 1 if single or num_prefill or not self.config.fast_forward else self._run_length(items, now_s)
        if num_steps > 1:
            durations = self._model.decode_run_s(num_steps, num_decode, context)
            ends = now_s + np.cumsum(durations)
            horizon = self.waiting.next_change_s() if len(self.waiting) and self._room_after(items) else math.inf
            if horizon < ends[-1]:  # a queued key changes mid-run: stop at the first step end after it
                num_steps = int(np.searchsorted(ends, horizon, side="left")) + 1
                ends = ends[:num_steps]
            if num_steps > 1:
                return Batch(items, now_s, ends, 0, num_decode, context, 0, True, self._num_runs)
        end = now_s + self._model.step_s(num_prefill, num_decode, context, pairs)
        return Batch(items, now_s, [end], num_prefill, num_decode, context, pairs, False, self._num_runs)

    def _room_after(self, items: list[tuple[SimRequest, int]]) -> bool:
        return len(self.running) < self.config.max_num_seqs and len(items) < self.config.max_num_batched_tokens

    def _run_length(self, items: list[tuple[SimRequest, int]], now_s: float) -> int:
        """Steps the decode batch can run unchanged: until the first request ends, and while even the worst
        case of every request crossing a block boundary every 16 steps fits in the free blocks."""
        if len(items) != len(self.running):
            return 1
        until_finish = min(r.num_output_tokens - r.num_generated for r, _ in items)
        kv_steps = self.config.block_size * (self.num_free_blocks // len(items))
        return max(1, min(until_finish, kv_steps))

    def _truncate_run(self, now_s: float) -> float | None:
        """End the decode run at the first step end at or after now_s, so the next step sees the new request."""
        batch = self.batch
        k = int(np.searchsorted(batch.ends_s, now_s, side="left")) + 1
        if k >= len(batch.ends_s):
            return None
        self._num_runs += 1
        batch.ends_s = batch.ends_s[:k]
        batch.run_id = self._num_runs
        return float(batch.ends_s[-1])

    # ---- applying steps --------------------------------------------------------------------------------

    def _apply_single_step(self, batch: Batch, now_s: float) -> list[SimRequest]:
        finished = []
        for request, num_new in batch.items:
            request.num_computed += num_new
            if request.num_computed == request.num_tokens:  # prompt (or recompute) done, or a decode: sample
                request.num_generated += 1
                request.token_times.append(now_s)
                if request.first_token_s is None:
                    request.first_token_s = now_s
                if request.num_generated >= request.num_output_tokens:
                    finished.append(request)
        return finished

    def _apply_decode_run(self, batch: Batch) -> list[SimRequest]:
        k = len(batch.ends_s)
        finished = []
        for request, _ in batch.items:
            request.num_computed += k
            request.num_generated += k
            need = max(0, self._blocks(request.num_computed) - request.num_blocks)
            self.num_free_blocks -= need
            request.num_blocks += need
            request.token_times.append(batch.ends_s)
            if request.num_generated >= request.num_output_tokens:
                finished.append(request)
        assert self.num_free_blocks >= 0, "decode run over-allocated KV blocks"
        return finished

    # ---- snapshot --------------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> ReplicaState:
        """The replica's state at now_s, counting the decode steps of a run in flight that ended by now_s; the
        step in flight is the one that ends next (for a decode run, one step of it, not the whole run)."""
        done, scheduled, busy_until = 0, {}, None
        if self.batch is not None:
            ends = self.batch.ends_s
            if self.batch.is_decode_run:
                done = int(np.searchsorted(ends, now_s, side="right"))
                current = int(np.searchsorted(ends, now_s, side="left"))  # < done only if a step ends at now_s
                busy_until = float(ends[min(current, len(ends) - 1)])
                if current == done < len(ends):
                    scheduled = {id(r): 1 for r, _ in self.batch.items}
            else:
                busy_until = self.batch.end_s
                scheduled = {id(r): n for r, n in self.batch.items}
        in_run = {id(r) for r, _ in self.batch.items} if done else set()
        running = tuple(
            ResidentRequest(
                r.spec,
                r.num_computed + (done if id(r) in in_run else 0),
                r.num_generated + (done if id(r) in in_run else 0),
                True,
                scheduled.get(id(r), 0),
            )
            for r in self.running
        )
        waiting = tuple(
            ResidentRequest(r.spec, r.num_computed, r.num_generated, False) for r in self.waiting.ordered(now_s)
        )
        return ReplicaState(
            replica_id=self.replica_id,
            now_s=now_s,
            num_free_kv_blocks=self.num_free_blocks,
            num_total_kv_blocks=self.num_total_blocks,
            running=running,
            waiting=waiting,
            busy_until_s=busy_until,
        )
