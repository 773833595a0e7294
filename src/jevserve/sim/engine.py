"""One engine replica with vLLM v1 scheduling semantics, driven by events so a cluster can hold several.

Each step follows vLLM's `Scheduler.schedule()` (vllm/v1/core/sched/scheduler.py):
1. running requests first, in admission order, each given what it still needs (a prefill chunk, or one decode
   token) within the step's token budget; when one cannot get a KV block, the running request the queue policy
   ranks last is preempted (its blocks freed, its progress recomputed later), possibly the request itself;
2. then, only if nothing was preempted, waiting requests in policy order while the budget, `max_num_seqs` and
   free KV blocks allow; with head-of-line blocking (vLLM's behaviour) admission stops at the first request
   that does not fit, otherwise it skips that one and tries the next.

The rules themselves (block counts, chunk sizes, admission, the preemption victim, preemption by recompute) are
the functions of `jevserve.serving.scheduling_rules`, which the router's forward TTFT estimate calls too.

A step's time comes from the profile's step-time model. Steps that only decode the same batch are run in one
go (`is_decode_run`) until the first request finishes, KV could run short, or the queue could change what is
admitted; the result is the same as stepping one by one up to float rounding, which a test checks.

The running batch is a set of numpy arrays (`jevserve.sim.running`), so a step over hundreds of running
requests costs a few array operations; KV blocks, and with prefix caching the cached prefixes of preempted
requests, are counted by a `BlockPool` (`jevserve.sim.block_pool`).
"""

from __future__ import annotations

import math

import numpy as np

from jevserve.serving import scheduling_rules as rules
from jevserve.serving.types import QueuePolicy, ReplicaState, ResidentRequest, RunningColumns
from jevserve.sim.block_pool import BlockPool
from jevserve.sim.engine_config import KV_ADMISSION_MODES, SIM_MODEL_VERSION, EngineConfig
from jevserve.sim.entities import Batch, SimRequest
from jevserve.sim.errors import EngineConfigError
from jevserve.sim.observer import Observer
from jevserve.sim.profile import Profile
from jevserve.sim.running import RunningBatch, StepEnds
from jevserve.sim.waiting import WaitingQueue

# EngineConfig and the version live in engine_config.py; they are re-exported here, where callers import them.
__all__ = ["KV_ADMISSION_MODES", "SIM_MODEL_VERSION", "Engine", "EngineConfig"]


def _object_array(items: list) -> np.ndarray:
    """A 1-d object array of `items` (np.array would try to build a 2-d array from tuple-like items)."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


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
        self.pool = BlockPool(self.num_total_blocks, prefix_caching=self.config.prefix_caching)
        self.waiting = WaitingQueue(policy)
        self._ends = StepEnds()
        self._run = RunningBatch(self._ends)
        self.batch: Batch | None = None  # the step or decode run in flight
        self.tick_pending = False
        self._num_runs = 0
        self._model = profile.step_time

    @property
    def num_free_blocks(self) -> int:
        """Free KV blocks, cached prefixes nobody holds included (they are evicted when needed)."""
        return self.pool.num_free

    @property
    def running(self) -> list[SimRequest]:
        """The running requests in admission order, their progress written back from the engine's arrays."""
        return [self._run.sync(i) for i in range(self._run.n)]

    # ---- entry points used by events -------------------------------------------------------------------

    def check_fits(self, request: SimRequest) -> str | None:
        """Why the request can never run (its full context exceeds the whole KV cache), or None when it can.

        Such a request is refused on its own, as vLLM refuses a request longer than the engine can hold (an
        error for that request, counted as failed by its benchmark), and the run goes on without it.
        """
        if request.spec.num_output_tokens is None:
            raise EngineConfigError(
                f"request {request.spec.request_id!r}: num_output_tokens is None; the simulator needs the true "
                "reply length to know when a request ends"
            )
        need = rules.blocks_for(request.spec.num_prompt_tokens + request.spec.num_output_tokens, self.config.block_size)
        if need > self.num_total_blocks:
            return (f"request {request.spec.request_id!r} needs {need} KV blocks but replica {self.replica_id} "
                    f"has {self.num_total_blocks}")
        return None

    def reject(self, request: SimRequest, reason: str, now_s: float) -> None:
        """Refuse a request that can never fit, and tell the observers."""
        request.rejected = reason
        request.replica_id = self.replica_id
        for o in self.observers:
            o.on_reject(request, now_s)

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
        num_scheduled, preempted, admitted = self._schedule(now_s)
        while not num_scheduled and preempted:
            # Everything that ran was preempted; vLLM's busy loop schedules again at once, now admitting.
            num_scheduled, preempted, admitted = self._schedule(now_s)
        if not num_scheduled:
            return None
        self.batch = self._make_batch(num_scheduled, now_s, single=bool(preempted or admitted))
        return self.batch

    def finish_step(self, now_s: float) -> list[SimRequest]:
        """Apply the batch in flight whose last step ends at now_s; returns the requests that finished."""
        batch = self.batch
        assert batch is not None and abs(batch.end_s - now_s) <= 1e-9 * max(1.0, now_s)
        self.batch = None
        rows = self._apply_decode_run(batch) if batch.is_decode_run else self._apply_single_step(batch, now_s)
        for o in self.observers:
            o.on_step(self.replica_id, batch, len(batch.ends_s))
        finished = self._run.remove(rows) if rows.size else []
        for request in finished:
            self.pool.free(request.num_blocks)  # nothing else can hit a finished request's blocks
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

    def _has_room(self) -> bool:
        batch_tokens = self.batch.num_requests if self.batch is not None else 0
        return self._run.n < self.config.max_num_seqs and batch_tokens < self.config.max_num_batched_tokens

    def _schedule(self, now_s: float) -> tuple[int, bool, bool]:
        """Build the next step: how many running requests (a prefix of the batch) it holds, whether one was
        preempted and whether one was admitted. Each row's tokens go to the running batch's `scheduled`."""
        num_scheduled, budget, preempted = self._schedule_running(now_s)
        num_admitted = 0
        if not preempted:
            num_admitted = self._admit_waiting(budget, now_s)
        # Admission runs only when every running request was scheduled, and appends: the step is a prefix.
        return num_scheduled + num_admitted, preempted, num_admitted > 0

    def _schedule_running(self, now_s: float) -> tuple[int, int, bool]:
        """Give running requests, in admission order, what they still need within the token budget, preempting
        when KV blocks run out. Returns (rows scheduled, budget left, whether a request was preempted).

        Rows are scheduled in vectorised segments: the token budget and the free blocks are shared in order, so
        cumulative sums say how far a segment goes before the budget ends or a request cannot get its blocks;
        only that request goes through the preemption loop one by one, as vLLM's scheduler does."""
        run, pool, bs = self._run, self.pool, self.config.block_size
        budget = self.config.max_num_batched_tokens
        index, preempted = 0, False
        while index < run.n and budget > 0:
            n = run.n
            computed = run.computed[index:n]
            want = run.prompt[index:n] + run.generated[index:n] - computed
            m, new, cum = rules.budget_split(want, budget)  # rows the budget reaches, the last one chunked
            need = rules.new_blocks_array(computed[:m], new, run.blocks[index : index + m], bs)
            cum_need = need.cumsum()
            ok = min(int(cum_need.searchsorted(pool.num_free, side="right")), m)  # rows whose blocks fit
            if ok:
                stop = index + ok
                run.blocks[index:stop] += need[:ok]
                run.scheduled[index:stop] = new[:ok]
                pool.allocate(int(cum_need[ok - 1]))
                budget -= min(int(cum[ok - 1]), budget)  # cum[ok - 1] < budget unless the last row was cut
                index = stop
            if ok == m:
                continue
            target, num_need, num_new = run.requests[index], int(need[ok]), int(new[ok])
            while num_need > pool.num_free:
                victim = rules.preemption_victim(self.policy, run.specs, now_s)
                if victim < index:  # it had been scheduled earlier in this step: give its tokens back
                    budget += int(run.scheduled[victim])
                    index -= 1
                preempted = True
                if self._preempt(victim, now_s) is target:
                    break
            else:
                run.blocks[index] += num_need
                run.scheduled[index] = num_new
                pool.allocate(num_need)
                budget -= num_new
                index += 1
                continue
            break  # the request preempted itself: vLLM stops scheduling running requests here
        return index, budget, preempted

    def _preempt(self, row: int, now_s: float) -> SimRequest:
        """Preempt the running request at `row` by recompute: free its blocks (keeping its full blocks of
        computed tokens cached, with prefix caching), reset its progress and queue it again."""
        victim = self._run.pop(row)
        num_cached = victim.num_computed // self.config.block_size if self.pool.prefix_caching else 0
        self.pool.free(rules.preempt_by_recompute(victim), victim, num_cached)
        victim.num_preemptions += 1
        self.waiting.push(victim, now_s)
        for o in self.observers:
            o.on_preempt(victim, now_s)
        return victim

    def _admit_waiting(self, budget: int, now_s: float) -> int:
        """Admit waiting requests in policy order while the budget, the batch cap and free blocks allow; returns
        how many were admitted (appended to the running batch with their tokens for this step)."""
        skipped: list[SimRequest] = []
        pool, bs, run, config = self.pool, self.config.block_size, self._run, self.config
        num_admitted = 0
        while rules.can_admit(budget, run.n, config.max_num_seqs):
            request = self.waiting.peek(now_s)
            if request is None:
                break
            # A preempted request takes back what is left of its cached prefix. vLLM caps a hit at num_tokens - 1
            # (the last token is computed for its logits); here the cap never binds, because a request is
            # preempted between steps, when at least its last sampled token is not computed yet.
            num_hits = pool.cached_blocks(request)
            computed = request.num_computed + num_hits * bs
            assert computed < request.num_tokens
            num_new = rules.chunk_tokens(request.num_tokens, computed, budget)
            reserve = rules.admission_reserve_tokens(request.num_tokens, computed, num_new, config.kv_admission)
            # The cached blocks it takes back are counted as free until then, so they are part of the need.
            need = rules.new_blocks(0, reserve, request.num_blocks, bs)
            action = rules.admission_action(need, pool.num_free, config.head_of_line_blocking)
            if action != rules.ADMIT:
                if action == rules.STOP:
                    break
                skipped.append(self.waiting.pop(now_s))  # skip it so a smaller request behind can start
                continue
            self.waiting.pop(now_s)
            pool.touch(request, num_hits)  # before allocating, so its own cached blocks are not evicted
            pool.allocate(need - num_hits)
            request.num_computed = computed
            request.num_blocks += need
            run.append(request, num_new)
            budget -= num_new
            num_admitted += 1
            if request.first_admit_s is None:
                request.first_admit_s = now_s
            for o in self.observers:
                o.on_admit(request, now_s)
        for request in skipped:
            self.waiting.push(request, now_s)
        return num_admitted

    # ---- step time and fast-forward --------------------------------------------------------------------

    def _make_batch(self, num_scheduled: int, now_s: float, *, single: bool) -> Batch:
        run = self._run
        new = run.scheduled[:num_scheduled].copy()
        computed, generated = run.computed[:num_scheduled], run.generated[:num_scheduled]
        tokens = run.prompt[:num_scheduled] + generated
        decoding = rules.is_decoding(generated, computed, tokens)  # the next step computes the last sampled token
        num_decode = int(np.count_nonzero(decoding))
        if num_decode == num_scheduled:  # the common case under load: a decode-only step
            context, num_prefill, pairs = int(tokens.sum()), 0, 0
        else:
            prefilling = ~decoding
            context = int(tokens[decoding].sum())
            num_prefill = int(new[prefilling].sum())
            pairs = int(rules.prefill_attention_pairs(computed, new)[prefilling].sum())
        self._num_runs += 1
        num_steps = (1 if single or num_prefill or not self.config.fast_forward
                     else self._run_length(num_scheduled, now_s))
        if num_steps > 1:
            durations = self._model.decode_run_s(num_steps, num_decode, context)
            ends = now_s + np.cumsum(durations)
            room = len(self.waiting) and self._room_after(num_scheduled)
            horizon = self.waiting.next_change_s() if room else math.inf
            if horizon < ends[-1]:  # a queued key changes mid-run: stop at the first step end after it
                num_steps = int(np.searchsorted(ends, horizon, side="left")) + 1
                ends = ends[:num_steps]
            if num_steps > 1:
                return Batch(num_scheduled, new, now_s, ends, 0, num_decode, context, 0, True, self._num_runs)
        end = now_s + self._model.step_s(num_prefill, num_decode, context, pairs)
        return Batch(num_scheduled, new, now_s, [end], num_prefill, num_decode, context, pairs, False, self._num_runs)

    def _room_after(self, num_scheduled: int) -> bool:
        return self._run.n < self.config.max_num_seqs and num_scheduled < self.config.max_num_batched_tokens

    def _run_length(self, num_scheduled: int, now_s: float) -> int:
        """Steps the decode batch can run unchanged: until the first request ends, and while even the worst
        case of every request crossing a block boundary every 16 steps fits in the free blocks."""
        run = self._run
        if num_scheduled != run.n:
            return 1
        until_finish = int((run.output[: run.n] - run.generated[: run.n]).min())
        kv_steps = self.config.block_size * (self.pool.num_free // num_scheduled)
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

    def _apply_single_step(self, batch: Batch, now_s: float) -> np.ndarray:
        """Add the step's tokens; rows whose prompt (or recompute) is done, or that decoded, sample a token.
        Returns the rows that finished."""
        run, k = self._run, batch.num_requests
        step = self._ends.count
        self._ends.append(now_s)
        computed, generated = run.computed[:k], run.generated[:k]
        computed += batch.num_new_tokens
        sampled = rules.samples_token(computed, run.prompt[:k] + generated)
        generated += sampled
        streak = run.streak[:k]
        streak[sampled & (streak < 0)] = step
        for i in (sampled & (generated == 1)).nonzero()[0].tolist():
            request = run.requests[i]
            if request.first_token_s is None:
                request.first_token_s = now_s
        # Rows left out of this step (the budget ran out before them) stop their run of consecutive tokens.
        for i in (run.streak[k : run.n] >= 0).nonzero()[0].tolist():
            run.close_streak(k + i, step)
        return (sampled & rules.is_finished(generated, run.output[:k])).nonzero()[0]

    def _apply_decode_run(self, batch: Batch) -> np.ndarray:
        """Add one token per step of the run to every row, and the KV blocks the tokens filled. Returns the rows
        that finished."""
        run, n, k = self._run, batch.num_requests, len(batch.ends_s)
        streak = run.streak[:n]
        streak[streak < 0] = self._ends.count
        self._ends.extend(np.asarray(batch.ends_s))
        computed = run.computed[:n]
        computed += k
        run.generated[:n] += k
        need = rules.new_blocks_array(computed, 0, run.blocks[:n], self.config.block_size)
        run.blocks[:n] += need
        self.pool.allocate(int(need.sum()))  # asserts the run did not over-allocate KV blocks
        return rules.is_finished(run.generated[:n], run.output[:n]).nonzero()[0]

    # ---- snapshot --------------------------------------------------------------------------------------

    def snapshot(self, now_s: float) -> ReplicaState:
        """The replica's state at now_s, counting the decode steps of a run in flight that ended by now_s; the
        step in flight is the one that ends next (for a decode run, one step of it, not the whole run)."""
        run, batch = self._run, self.batch
        n = run.n
        done, busy_until = 0, None
        scheduled = np.zeros(n, dtype=np.int64)
        if batch is not None:
            ends = batch.ends_s
            if batch.is_decode_run:
                done = int(np.searchsorted(ends, now_s, side="right"))
                current = int(np.searchsorted(ends, now_s, side="left"))  # < done only if a step ends at now_s
                busy_until = float(ends[min(current, len(ends) - 1)])
                if current == done < len(ends):
                    scheduled[: batch.num_requests] = 1
            else:
                busy_until = batch.end_s
                scheduled[: batch.num_requests] = batch.num_new_tokens
        in_run = np.zeros(n, dtype=np.int64)
        if batch is not None and done:
            in_run[: batch.num_requests] = done
        computed, generated = run.computed[:n] + in_run, run.generated[:n] + in_run
        running = tuple(
            ResidentRequest(spec, c, g, True, s)
            for spec, c, g, s in zip(run.specs, computed.tolist(), generated.tolist(), scheduled.tolist(), strict=True)
        )
        waiting = tuple(
            ResidentRequest(r.spec, r.num_computed, r.num_generated, False) for r in self.waiting.ordered(now_s)
        )
        columns = RunningColumns(
            num_prompt_tokens=run.prompt[:n].copy(),
            num_computed_tokens=computed,
            num_generated_tokens=generated,
            num_scheduled_tokens=scheduled,
            predicted_output_tokens=run.predicted[:n].copy(),
            requests=_object_array(run.specs),
        )
        return ReplicaState(
            replica_id=self.replica_id,
            now_s=now_s,
            num_free_kv_blocks=self.pool.num_free,
            num_total_kv_blocks=self.num_total_blocks,
            running=running,
            waiting=waiting,
            busy_until_s=busy_until,
            running_columns=columns,
        )
