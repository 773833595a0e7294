"""Forward simulation of one replica from a snapshot, to the first token of one new request.

The snapshot is loaded into the one step planner (`VllmStepPlanner`, the scheduling loop the simulator's engine
runs), and the planner is stepped with the replica's step-time model until the new request samples its first
token: the same admission, token budget and preemption decisions the engine would take, in the same order.

What the estimate cannot know is guessed:
- each resident request's reply length: its prediction rounded up, else the model's default, and at least one
  token more than it has produced (`expected_total_tokens`);
- the step in flight: it is assumed to end at the snapshot's `busy_until_s` with the tokens it scheduled;
- KV blocks: a decoding request holds the blocks its computed tokens fill, a prefilling one what its admission
  reserved (`scheduling_rules.blocks_held`); the snapshot's own free-block count is not used, so prefix caching
  (cached blocks of preempted requests) is not modelled.

Decode-only steps that the plan marks repeatable are summed in closed form until a request is expected to finish,
KV blocks run short, or the queue could change (a key changes or a request arrives), so the work is proportional
to the number of finishes and prefill steps before the new request's first token, not to the number of steps;
a step model without its own `decode_run_total_s` must be linear in decode context.
"""

from __future__ import annotations

import math

import numpy as np

import jevserve.serving.scheduling_rules as rules
from jevserve.serving.engine_config import EngineConfig
from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.running_batch import RunningBatch
from jevserve.serving.step_plan import StepPlan
from jevserve.serving.types import QueuePolicy, ReplicaState, Request, RunningColumns
from jevserve.serving.vllm_planner import VllmStepPlanner


def expected_total_tokens(request: Request, num_generated: int, default_output_tokens: float) -> int:
    """The reply length a request is expected to stop at: its prediction rounded up (else the default), and at
    least one token more than it has produced, so a request that outlived its prediction ends with its next
    token."""
    guess = request.predicted_output_tokens
    base = default_output_tokens if guess is None else guess
    return max(math.ceil(base), num_generated + 1, 1)


def _columns_of(state: ReplicaState) -> RunningColumns:
    """The snapshot's running requests as columns (its own, or built from the `running` tuple)."""
    if state.running_columns is not None:
        return state.running_columns
    running = state.running
    count = len(running)
    requests = np.empty(count, dtype=object)
    requests[:] = [r.request for r in running]
    guesses = (r.request.predicted_output_tokens for r in running)
    return RunningColumns(
        num_prompt_tokens=np.fromiter((r.request.num_prompt_tokens for r in running), np.int64, count),
        num_computed_tokens=np.fromiter((r.num_computed_tokens for r in running), np.int64, count),
        num_generated_tokens=np.fromiter((r.num_generated_tokens for r in running), np.int64, count),
        num_scheduled_tokens=np.fromiter((r.num_scheduled_tokens for r in running), np.int64, count),
        predicted_output_tokens=np.fromiter((np.nan if g is None else g for g in guesses), np.float64, count),
        requests=requests,
    )


def load_running(planner: VllmStepPlanner, state: ReplicaState, default_output_tokens: float) -> None:
    """Load the snapshot's running requests into the planner as they will be when the step in flight ends: its
    tokens computed, a token sampled where a context completes, and requests expected to end with it gone."""
    cols = _columns_of(state)
    block_size, kv_admission = planner.config.block_size, planner.config.kv_admission
    generated, scheduled = cols.num_generated_tokens, cols.num_scheduled_tokens
    num_tokens = cols.num_prompt_tokens + generated
    computed = cols.num_computed_tokens + scheduled
    # Between steps a running request has fewer computed tokens than its context, so the step in flight samples
    # a token exactly for the requests it leaves fully computed.
    sampled = rules.samples_token(computed, num_tokens)
    predicted = cols.predicted_output_tokens
    guess = np.where(np.isnan(predicted), default_output_tokens, predicted)
    generated_after = generated + sampled
    ending = sampled & rules.is_finished(generated_after, guess)  # the step in flight produces its last token
    decoding = sampled | ((scheduled == 0) & rules.is_decoding(generated, computed, num_tokens))
    held = np.where(decoding, rules.blocks_for(computed, block_size),
                    rules.blocks_held(num_tokens, computed, kv_admission, block_size))
    output = np.maximum(np.ceil(guess).astype(np.int64), generated_after + 1)
    specs, prompt = cols.requests, cols.num_prompt_tokens
    if ending.any():
        keep = ~ending
        specs, prompt, output, computed = specs[keep], prompt[keep], output[keep], computed[keep]
        generated_after, held = generated_after[keep], held[keep]
    planner.running.load(specs.tolist(), prompt=prompt, output=output, computed=computed, generated=generated_after,
                         blocks=held)
    planner.pool.allocate(int(held.sum()))


class ReplicaForward:
    """One forward pass: load a snapshot plus the new request, then step until the new request's first token."""

    def __init__(
        self,
        state: ReplicaState,
        request: Request,
        *,
        step_time,
        policy: QueuePolicy,
        config: EngineConfig,
        default_output_tokens: float,
        enqueue_delay_s: float = 0.0,
    ) -> None:
        self._step_time = step_time
        self._step_s = step_time.step_s
        self.now_s = state.now_s
        self.t = max(state.now_s, state.busy_until_s) if state.busy_until_s is not None else state.now_s
        capacity = len(state.running) + len(state.waiting) + len(state.in_transit) + 1
        self.planner = VllmStepPlanner(config, policy, state.num_total_kv_blocks, running=RunningBatch(capacity))
        load_running(self.planner, state, default_output_tokens)
        self.planner.waiting.extend(
            [EngineRequest(r.request, expected_total_tokens(r.request, r.num_generated_tokens, default_output_tokens),
                           r.num_computed_tokens, r.num_generated_tokens) for r in state.waiting], self.t)
        self._new = EngineRequest(request, expected_total_tokens(request, 0, default_output_tokens))
        self._new_is_running = False
        # Requests not yet queued, by the time they reach the queue: those the snapshot lists as in transit
        # (queued at arrival + decision delay), and the new one.
        arrivals = [(max(r.arrival_s + enqueue_delay_s, state.now_s), i,
                     EngineRequest(r, expected_total_tokens(r, 0, default_output_tokens)))
                    for i, r in enumerate(state.in_transit)]
        arrivals.append((state.now_s + enqueue_delay_s, len(arrivals), self._new))
        self._arrivals = [entry[2:] + entry[:1] for entry in sorted(arrivals, key=lambda e: (e[0], e[1]))]

    def run(self, max_iterations: int = 100_000) -> float:
        """Seconds from the snapshot to the new request's first token (inf if it can never be admitted)."""
        planner, arrivals = self.planner, self._arrivals
        for _ in range(max_iterations):
            while arrivals and arrivals[0][1] <= self.t:
                planner.add_request(arrivals.pop(0)[0], self.t)
            plan = planner.plan_step(self.t)
            if plan.is_empty:
                if not arrivals:
                    return math.inf  # nothing runs and the queue head cannot be admitted: it never will be
                self.t = arrivals[0][1]  # nothing runs until the next request is queued
                continue
            if self._new_samples_in(plan):
                self.t += self._step_s(plan.num_prefill_tokens, plan.num_decode_tokens, plan.decode_context_tokens,
                                       plan.prefill_attention_pairs)
                return self.t - self.now_s
            if plan.is_repeatable:
                self._decode_run(plan)
            else:
                self.t += self._step_s(plan.num_prefill_tokens, plan.num_decode_tokens, plan.decode_context_tokens,
                                       plan.prefill_attention_pairs)
                planner.apply_step(plan)
        return math.inf

    def _new_samples_in(self, plan: StepPlan) -> bool:
        """Whether the step samples the new request's first token."""
        new = self._new
        if self._new_is_running and any(r is new for r in plan.preempted):
            self._new_is_running = False
        if any(r is new for r in plan.admitted):
            self._new_is_running = True
        if not self._new_is_running:
            return False
        running = self.planner.running
        row = running.requests.index(new)
        if row >= plan.num_rows:
            return False
        computed = int(running.computed[row]) + int(plan.num_new_tokens[row])
        return bool(rules.samples_token(computed, int(running.prompt[row]) + int(running.generated[row])))

    def _run_s(self, num_steps: int, batch_size: int, context: int) -> float:
        """Duration of `num_steps` decode steps whose context starts at `context` and grows `batch_size` per step:
        the step model's own sum when it has one (a roofline-bounded model does), else the closed form of a model
        linear in decode context."""
        total = getattr(self._step_time, "decode_run_total_s", None)
        if total is not None:
            return total(num_steps, batch_size, context)
        first_s = self._step_s(0, batch_size, context, 0)
        context_token_s = self._step_s(0, 0, 1, 0) - self._step_s(0, 0, 0, 0)
        return num_steps * first_s + context_token_s * batch_size * num_steps * (num_steps - 1) / 2

    def _decode_run(self, plan: StepPlan) -> None:
        """Run the repeatable decode step until a request finishes, KV runs short, or the queue may change."""
        running, block_size = self.planner.running, self.planner.config.block_size
        n, context = plan.num_rows, plan.decode_context_tokens
        max_steps = max(1, int((running.output[:n] - running.generated[:n]).min()))
        horizon = min(self.planner.waiting.next_change_s(), self._arrivals[0][1] if self._arrivals else math.inf)
        if horizon < math.inf and max_steps > 1:
            # stop at the first step end at or after the horizon, as the engine cuts a run for a queue change
            low, high = 1, max_steps
            while low < high:
                middle = (low + high) // 2
                if self.t + self._run_s(middle, n, context) >= horizon:
                    high = middle
                else:
                    low = middle + 1
            max_steps = low
        # KV: the first step's blocks are allocated; each further block_size steps take n blocks, and a row takes
        # its block at the steps where its computed tokens reach a multiple of block_size.
        free = self.planner.pool.num_free
        cycles = min((max_steps - 1) // block_size, free // n)
        num_steps, used = 1 + cycles * block_size, cycles * n
        if num_steps < max_steps:
            residues = np.bincount(running.computed[:n] % block_size, minlength=block_size)
            while num_steps < max_steps:
                crossing = int(residues[(-num_steps) % block_size])
                if used + crossing > free:
                    break
                used += crossing
                num_steps += 1
        self.t += self._run_s(num_steps, n, context)
        self.planner.apply_step(plan, num_steps)
