"""The step planner with vLLM v1's scheduling rules: the one scheduling loop that the simulator's engine, the
router's TTFT estimate and the live engine all run.

Each plan follows `Scheduler.schedule()` in vLLM's `vllm/v1/core/sched/scheduler.py`:
1. running requests first, in admission order, each given what it still needs (a prefill chunk, or one decode
   token) within the step's token budget and `long_prefill_token_threshold`; when one cannot get a KV block, the
   running request the queue policy ranks last is preempted (its blocks freed, its progress recomputed later),
   possibly the request itself;
2. then, only if nothing was preempted, waiting requests in policy order while the budget, `max_num_seqs` and
   free KV blocks allow; with head-of-line blocking (vLLM's behaviour) admission stops at the first request
   that does not fit, otherwise it skips that one and tries the next.

The rules themselves (block counts, chunk sizes, admission, the preemption victim, preemption by recompute) are
the functions of `jevserve.serving.scheduling_rules`. Running requests are scheduled in vectorised segments: the
token budget and the free blocks are shared in order, so cumulative sums say how far a segment goes before the
budget ends or a request cannot get its blocks; only that request goes through the preemption loop one by one.
"""

from __future__ import annotations

import numpy as np

import jevserve.serving.scheduling_rules as rules
from jevserve.serving.block_pool import BlockPool
from jevserve.serving.engine_config import EngineConfig
from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.running_batch import RunningBatch
from jevserve.serving.step_plan import StepPlan
from jevserve.serving.step_planner import StepPlanner
from jevserve.serving.types import QueuePolicy
from jevserve.serving.waiting_queue import WaitingQueue


class VllmStepPlanner(StepPlanner):
    """vLLM v1's scheduler over a running batch of arrays, a policy-ordered waiting queue and a KV block pool.

    `running`, `waiting` and `pool` are public for drivers that read them (snapshots, fast-forward of decode
    runs); only the planner changes them.
    """

    def __init__(self, config: EngineConfig, policy: QueuePolicy, num_kv_blocks: int, *,
                 running: RunningBatch | None = None) -> None:
        self.config = config
        self.policy = policy
        self.pool = BlockPool(num_kv_blocks, prefix_caching=config.prefix_caching)
        self.waiting = WaitingQueue(policy)
        self.running = running if running is not None else RunningBatch()

    # ---- the seam ------------------------------------------------------------------------------------------

    def add_request(self, request: EngineRequest, now_s: float) -> None:
        """Queue a request as waiting, ranked at now_s."""
        self.waiting.push(request, now_s)

    def plan_step(self, now_s: float) -> StepPlan:
        """Plan the next step at now_s (see `StepPlanner.plan_step`)."""
        preempted: list[EngineRequest] = []
        while True:
            before = len(preempted)
            num_rows, budget = self._schedule_running(now_s, preempted)
            pass_preempted = len(preempted) > before
            admitted = [] if pass_preempted else self._admit_waiting(budget, now_s)
            num_rows += len(admitted)
            if num_rows or not pass_preempted:
                break
            # Everything that was scheduled got preempted; vLLM's busy loop schedules again at once.
        if not num_rows:
            return StepPlan.make_empty(tuple(preempted))
        return self._make_plan(num_rows, tuple(admitted), tuple(preempted), fresh=not (pass_preempted or admitted))

    def apply_step(self, plan: StepPlan, num_steps: int = 1) -> list[EngineRequest]:
        """Add the step's tokens, sample where a context is complete, remove finished requests."""
        run, k = self.running, plan.num_rows
        computed, generated = run.computed[:k], run.generated[:k]
        if num_steps == 1:
            computed += plan.num_new_tokens
            sampled = rules.samples_token(computed, run.prompt[:k] + generated)
            generated += sampled
            run.record_step(k, sampled, 1)
            rows = (sampled & rules.is_finished(generated, run.output[:k])).nonzero()[0]
        else:
            assert plan.is_repeatable and k == run.n, "only a repeatable decode step runs several times"
            computed += num_steps
            generated += num_steps
            need = rules.new_blocks_array(computed, 0, run.blocks[:k], self.config.block_size)
            run.blocks[:k] += need
            self.pool.allocate(int(need.sum()))  # asserts the run did not over-allocate KV blocks
            run.record_step(k, None, num_steps)
            rows = rules.is_finished(generated, run.output[:k]).nonzero()[0]
        finished = run.remove(rows) if rows.size else []
        for request in finished:
            self.pool.free(request.num_blocks)  # nothing else can hit a finished request's blocks
            request.num_blocks = 0
        return finished

    def abort(self, request: EngineRequest) -> bool:
        """Remove a running or waiting request, freeing its KV blocks."""
        if self.waiting.remove(request):
            return True
        for row, held in enumerate(self.running.requests):
            if held is request:
                self.running.pop(row)
                self.pool.free(request.num_blocks)
                request.num_blocks = 0
                return True
        return False

    @property
    def num_running(self) -> int:
        """Requests in the running batch."""
        return self.running.n

    @property
    def num_waiting(self) -> int:
        """Requests in the waiting queue."""
        return len(self.waiting)

    def kv_cache_usage(self) -> float:
        """The fraction of KV blocks held (cached prefixes nobody holds count as free, as in vLLM)."""
        return 1.0 - self.pool.num_free / self.pool.num_total

    # ---- planning --------------------------------------------------------------------------------------------

    def _schedule_running(self, now_s: float, preempted: list[EngineRequest]) -> tuple[int, int]:
        """Give running requests, in admission order, what they still need within the token budget, preempting
        when KV blocks run out (victims appended to `preempted`). Returns (rows scheduled, budget left)."""
        run, pool, block_size = self.running, self.pool, self.config.block_size
        budget = self.config.max_num_batched_tokens
        long_prefill = self.config.long_prefill_token_threshold
        index = 0
        while index < run.n and budget > 0:
            n = run.n
            computed = run.computed[index:n]
            want = run.prompt[index:n] + run.generated[index:n] - computed
            if long_prefill:  # vLLM caps a long prompt's chunk before sharing out the budget
                np.minimum(want, long_prefill, out=want)
            num_reached, new, cum = rules.budget_split(want, budget)  # the last row reached may be cut
            need = rules.new_blocks_array(computed[:num_reached], new, run.blocks[index : index + num_reached],
                                          block_size)
            cum_need = need.cumsum()
            if int(cum_need[-1]) <= pool.num_free:  # the common case: every row reached gets its blocks
                num_fit = num_reached
            else:
                num_fit = int(cum_need.searchsorted(pool.num_free, side="right"))
            if num_fit:
                stop = index + num_fit
                run.blocks[index:stop] += need[:num_fit]
                run.scheduled[index:stop] = new[:num_fit]
                pool.allocate(int(cum_need[num_fit - 1]))
                budget -= min(int(cum[num_fit - 1]), budget)  # below budget unless the last row was cut
                index = stop
            if num_fit == num_reached:
                continue
            num_need, num_new = int(need[num_fit]), int(new[num_fit])
            preempted_itself = False
            while num_need > pool.num_free:
                victim = rules.preemption_victim(self.policy, run.specs, now_s)
                preempted_itself = victim == index
                if victim < index:  # it had been scheduled earlier in this step: give its tokens back
                    budget += int(run.scheduled[victim])
                    index -= 1
                preempted.append(self._preempt(victim, now_s))
                if preempted_itself:
                    break
            if preempted_itself:
                break  # vLLM stops scheduling running requests here
            run.blocks[index] += num_need
            run.scheduled[index] = num_new
            pool.allocate(num_need)
            budget -= num_new
            index += 1
        return index, budget

    def _preempt(self, row: int, now_s: float) -> EngineRequest:
        """Preempt the running request at `row` by recompute: free its blocks (keeping its full blocks of
        computed tokens cached, with prefix caching), reset its progress and queue it again."""
        victim = self.running.pop(row)
        num_cached = victim.num_computed // self.config.block_size if self.pool.prefix_caching else 0
        self.pool.free(rules.preempt_by_recompute(victim), victim, num_cached)
        victim.num_preemptions += 1
        self.waiting.push(victim, now_s)
        return victim

    def _admit_waiting(self, budget: int, now_s: float) -> list[EngineRequest]:
        """Admit waiting requests in policy order while the budget, the batch cap and free blocks allow; each
        joins the running batch with its tokens for this step. Returns them in order."""
        pool, block_size, run, config = self.pool, self.config.block_size, self.running, self.config
        skipped: list[EngineRequest] = []
        admitted: list[EngineRequest] = []
        while rules.can_admit(budget, run.n, config.max_num_seqs):
            request = self.waiting.peek(now_s)
            if request is None:
                break
            # A preempted request takes back what is left of its cached prefix. vLLM caps a hit at num_tokens - 1
            # (the last token is computed for its logits); here the cap never binds, because a request is
            # preempted between steps, when at least its last sampled token is not computed yet.
            num_hits = pool.cached_blocks(request)
            computed = request.num_computed + num_hits * block_size
            assert computed < request.num_tokens
            num_new = rules.chunk_tokens(request.num_tokens, computed, budget)
            if config.long_prefill_token_threshold:
                num_new = min(num_new, config.long_prefill_token_threshold)
            reserve = rules.admission_reserve_tokens(request.num_tokens, computed, num_new, config.kv_admission)
            # The cached blocks it takes back are counted as free until then, so they are part of the need.
            need = rules.new_blocks(0, reserve, request.num_blocks, block_size)
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
            admitted.append(request)
        for request in skipped:
            self.waiting.push(request, now_s)
        return admitted

    def _make_plan(self, num_rows: int, admitted: tuple[EngineRequest, ...], preempted: tuple[EngineRequest, ...],
                   *, fresh: bool) -> StepPlan:
        """The plan of the first `num_rows` rows, with the token counts a step-time model reads."""
        run = self.running
        new = run.scheduled[:num_rows].copy()
        new.flags.writeable = False
        computed, generated = run.computed[:num_rows], run.generated[:num_rows]
        tokens = run.prompt[:num_rows] + generated
        decoding = rules.is_decoding(generated, computed, tokens)  # the step computes the last sampled token
        num_decode = int(np.count_nonzero(decoding))
        if num_decode == num_rows:  # the common case under load: a decode-only step
            context, num_prefill, pairs = int(tokens.sum()), 0, 0
        else:
            prefilling = ~decoding
            context = int(tokens[decoding].sum())
            num_prefill = int(new[prefilling].sum())
            pairs = int(rules.prefill_attention_pairs(computed, new)[prefilling].sum())
        repeatable = fresh and num_decode == num_rows == run.n
        return StepPlan(num_rows, new, admitted, preempted, num_prefill, num_decode, context, pairs, repeatable)
