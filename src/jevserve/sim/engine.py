"""One engine replica with vLLM v1 scheduling semantics, driven by events so a cluster can hold several.

The engine is a driver of the one step planner (`jevserve.serving.vllm_planner.VllmStepPlanner`, the scheduling
loop the router's TTFT estimate and the live engine run too): it queues requests, asks the planner for the next
step when idle, gives the step the profile's step time, and applies it when its StepDone event comes.

Steps that only decode the same batch are run in one go (`is_decode_run`) until the first request finishes, KV
could run short, or the queue could change what is admitted; the result is the same as stepping one by one up to
float rounding, which a test checks. The running batch keeps every request's token times
(`jevserve.sim.running.TimedRunningBatch`) for the metrics.
"""

from __future__ import annotations

import math

import numpy as np

import jevserve.serving.scheduling_rules as rules
from jevserve.serving.step_plan import StepPlan
from jevserve.serving.types import QueuePolicy, ReplicaState, ResidentRequest, RunningColumns
from jevserve.serving.vllm_planner import VllmStepPlanner
from jevserve.sim.engine_config import KV_ADMISSION_MODES, SIM_MODEL_VERSION, EngineConfig
from jevserve.sim.entities import Batch, SimRequest
from jevserve.sim.errors import EngineConfigError
from jevserve.sim.observer import Observer
from jevserve.sim.profile import Profile
from jevserve.sim.running import StepEnds, TimedRunningBatch

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
        self._ends = StepEnds()
        self.planner = VllmStepPlanner(self.config, policy, self.num_total_blocks,
                                       running=TimedRunningBatch(self._ends))
        self.pool, self.waiting, self._run = self.planner.pool, self.planner.waiting, self.planner.running
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
        self.planner.add_request(request, now_s)
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
        plan = self.planner.plan_step(now_s)
        for victim in plan.preempted:
            for o in self.observers:
                o.on_preempt(victim, now_s)
        for request in plan.admitted:
            if request.first_admit_s is None:
                request.first_admit_s = now_s
            for o in self.observers:
                o.on_admit(request, now_s)
        if plan.is_empty:
            return None
        self.batch = self._make_batch(plan, now_s)
        return self.batch

    def finish_step(self, now_s: float) -> list[SimRequest]:
        """Apply the batch in flight whose last step ends at now_s; returns the requests that finished."""
        batch = self.batch
        assert batch is not None and abs(batch.end_s - now_s) <= 1e-9 * max(1.0, now_s)
        self.batch = None
        if batch.is_decode_run:
            self._ends.extend(np.asarray(batch.ends_s))  # the running batch reads the step ends from here
        else:
            self._ends.append(now_s)
        finished = self.planner.apply_step(batch.plan, len(batch.ends_s))
        for o in self.observers:
            o.on_step(self.replica_id, batch, len(batch.ends_s))
        for request in finished:
            request.finish_s = now_s
            for o in self.observers:
                o.on_finish(request, now_s)
        return finished

    @property
    def is_idle(self) -> bool:
        """True when no step is in flight."""
        return self.batch is None

    # ---- fast-forward ----------------------------------------------------------------------------------

    def _has_room(self) -> bool:
        batch_tokens = self.batch.num_requests if self.batch is not None else 0
        return self._run.n < self.config.max_num_seqs and batch_tokens < self.config.max_num_batched_tokens

    def _make_batch(self, plan: StepPlan, now_s: float) -> Batch:
        """The plan with its step times: one step, or a run of identical decode steps when the plan allows it."""
        self._num_runs += 1
        num_steps = self._run_length(plan) if plan.is_repeatable and self.config.fast_forward else 1
        if num_steps > 1:
            durations = self._model.decode_run_s(num_steps, plan.num_decode_tokens, plan.decode_context_tokens)
            ends = now_s + np.cumsum(durations)
            room = len(self.waiting) and self._room_after(plan.num_rows)
            horizon = self.waiting.next_change_s() if room else math.inf
            if horizon < ends[-1]:  # a queued key changes mid-run: stop at the first step end after it
                num_steps = int(np.searchsorted(ends, horizon, side="left")) + 1
                ends = ends[:num_steps]
            if num_steps > 1:
                return Batch(plan, now_s, ends, True, self._num_runs)
        end = now_s + self._model.step_s(plan.num_prefill_tokens, plan.num_decode_tokens, plan.decode_context_tokens,
                                         plan.prefill_attention_pairs)
        return Batch(plan, now_s, [end], False, self._num_runs)

    def _room_after(self, num_scheduled: int) -> bool:
        return self._run.n < self.config.max_num_seqs and num_scheduled < self.config.max_num_batched_tokens

    def _run_length(self, plan: StepPlan) -> int:
        """Steps the decode batch can run unchanged: until the first request ends, and while even the worst
        case of every request crossing a block boundary every 16 steps fits in the free blocks."""
        run = self._run
        until_finish = int((run.output[: run.n] - run.generated[: run.n]).min())
        kv_steps = self.config.block_size * (self.pool.num_free // plan.num_rows)
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
