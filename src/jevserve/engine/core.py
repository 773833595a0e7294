"""The live engine: the one step planner (`jevserve.serving.vllm_planner`) driven by the wall clock.

One asyncio task runs vLLM's busy loop: take in the requests that have arrived and drop the ones whose clients
left, plan a step, wait until the step's end, apply the step, wake the streams whose requests sampled a token.

Two clocks: the wall clock, which runs `speedup` times slower than engine time from the engine's start, and the
engine's own, `free_at_s`, the end of the last step. Steps run back to back on the engine's clock with the
profile's step times, exactly as in the simulator: a request that arrives while a step runs joins at the next step
boundary, and an idle engine starts its next step at the arrival that woke it. The engine waits for the wall clock
to reach each step's end before handing out its tokens; when the host falls behind (a wake-up or a step's
bookkeeping took longer than the step), it does not wait and catches up, so timing errors do not add up, and
`lag_s` says how far behind the wall clock the last step's tokens went out. Every time the engine reports (metrics,
timestamps) is engine time, as a real engine at speed 1 would report it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np

from jevserve.engine.requests import LiveRequest
from jevserve.serving.engine_config import EngineConfig
from jevserve.serving.running_batch import RunningBatch
from jevserve.serving.scheduling_rules import blocks_for
from jevserve.serving.step_plan import StepPlan
from jevserve.serving.types import QueuePolicy, Request
from jevserve.serving.vllm_planner import VllmStepPlanner
from jevserve.sim.profile import Profile


class StreamingBatch(RunningBatch):
    """The running batch of the live engine: sampled tokens are handed to their requests' streams, the first token
    at once and then every `stream_interval` tokens (vLLM's `--stream-interval`); the last one comes with the
    request's finish."""

    def __init__(self, stream_interval: int = 1) -> None:
        super().__init__()
        self.stream_interval = stream_interval
        self.step_end_s = 0.0  # engine time of the step being applied (set by the engine before applying it)
        self.num_sampled_tokens = 0  # every token sampled so far, those of requests dropped later included
        self.first_tokens: list[LiveRequest] = []  # requests that sampled their first token in the step applied

    def record_step(self, num_rows: int, sampled: np.ndarray | None, num_steps: int) -> None:
        """Count the tokens sampled and tell the requests whose stream is due that they sampled tokens."""
        generated = self.generated[:num_rows]
        self.num_sampled_tokens += num_steps * (num_rows if sampled is None else int(np.count_nonzero(sampled)))
        due = (generated == 1) | (generated % self.stream_interval == 0)
        if sampled is not None:
            due &= sampled
        for i in np.flatnonzero(due).tolist():
            request = self.requests[i]
            if request.on_token(int(generated[i]), self.step_end_s):
                self.first_tokens.append(request)


class LiveEngine:
    """One replica served live: requests in, tokens out as steps complete, on a clock `speedup` times the wall's."""

    def __init__(self, profile: Profile, config: EngineConfig, policy: QueuePolicy, *, speedup: float = 1.0,
                 stream_interval: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        if not speedup > 0:
            raise ValueError(f"speedup={speedup!r}; expected a number > 0 (1 = real time)")
        if stream_interval < 1:
            raise ValueError(f"stream_interval={stream_interval!r}; expected tokens per chunk >= 1")
        self.profile, self.config, self.speedup = profile, config, speedup
        self.num_total_blocks = config.num_kv_blocks or profile.num_kv_blocks(config.block_size)
        self.batch = StreamingBatch(stream_interval)
        self.planner = VllmStepPlanner(config, policy, self.num_total_blocks, running=self.batch)
        self._clock = clock
        self._start = clock()
        self._arrived: list[LiveRequest] = []
        self._left: list[LiveRequest] = []
        self._wake = asyncio.Event()
        self.free_at_s = 0.0  # engine time: the end of the last step, when the engine can start the next
        self.lag_s = 0.0  # engine seconds the last step's tokens went out after their time
        self.num_steps = 0
        self.num_preemptions = 0
        # (event, request): "first_token", "finish" or "preempt"
        self.observers: list[Callable[[str, LiveRequest], None]] = []

    def now_s(self) -> float:
        """Engine time: wall seconds since the engine started, times `speedup`."""
        return (self._clock() - self._start) * self.speedup

    def blocks_needed(self, num_prompt_tokens: int, num_output_tokens: int) -> int:
        """KV blocks a request's whole context takes (it can run only if this fits in the cache)."""
        return int(blocks_for(num_prompt_tokens + num_output_tokens, self.config.block_size))

    def submit(self, request_id: str, num_prompt_tokens: int, num_output_tokens: int, *, priority: int = 0,
               finish_reason: str = "stop", text_chars: int | None = None) -> LiveRequest:
        """Hand a request to the engine, arrived now; it joins the waiting queue before the next step is planned.
        `finish_reason` and `text_chars` are what its reply ends with (LiveRequest)."""
        now = self.now_s()
        spec = Request(request_id, now, num_prompt_tokens, num_output_tokens, priority=priority)
        request = LiveRequest(spec, num_output_tokens, finish_reason=finish_reason, text_chars=text_chars,
                              arrival_s=now)
        self._arrived.append(request)
        self._wake.set()
        return request

    def cancel(self, request: LiveRequest) -> None:
        """The client went away: drop the request before the next step, freeing its KV blocks."""
        if not request.finished and not request.aborted and not request.left:
            request.left = True
            self._left.append(request)
            self._wake.set()

    @property
    def num_running(self) -> int:
        """Requests in the running batch."""
        return self.planner.num_running

    @property
    def num_waiting(self) -> int:
        """Requests waiting, including those that arrived since the last step was planned."""
        return self.planner.num_waiting + len(self._arrived)

    def kv_cache_usage(self) -> float:
        """The fraction of KV blocks in use, 0 to 1."""
        return self.planner.kv_cache_usage()

    async def run(self) -> None:
        """vLLM's busy loop, until cancelled."""
        while True:
            self._take_in()
            if not self.planner.has_unfinished_requests():
                await self._idle()
                continue
            started = self.free_at_s
            plan = self.planner.plan_step(started)
            self.num_preemptions += len(plan.preempted)
            for request in plan.admitted:
                if request.first_admit_s is None:
                    request.first_admit_s = started
            for request in plan.preempted:
                self._notify("preempt", request)
            if plan.is_empty:
                await self._idle()  # nothing fits until a request arrives or leaves
                continue
            end = started + self._step_s(plan)
            await self._sleep_until(end)
            self._apply(plan, end)
            self.free_at_s = end

    def _take_in(self) -> None:
        """Queue the requests that arrived by the engine's clock; drop those whose clients left."""
        if self._arrived:
            due = [r for r in self._arrived if r.arrival_s <= self.free_at_s]
            if due:
                self._arrived = [r for r in self._arrived if r.arrival_s > self.free_at_s]
                for request in due:
                    self.planner.add_request(request, request.arrival_s)
        left, self._left = self._left, []
        for request in left:
            if request in self._arrived:  # not yet due (it arrived while a step ran): never planned
                self._arrived.remove(request)
                request.aborted = True
            elif self.planner.abort(request):
                request.aborted = True

    async def _idle(self) -> None:
        """Wait for something to do, and move the engine's clock to when it came: the next arrival."""
        self._wake.clear()
        if not self._arrived and not self._left:
            await self._wake.wait()
        if self._arrived:
            self.free_at_s = max(self.free_at_s, min(r.arrival_s for r in self._arrived))

    def _step_s(self, plan: StepPlan) -> float:
        return self.profile.step_time.step_s(plan.num_prefill_tokens, plan.num_decode_tokens,
                                             plan.decode_context_tokens, plan.prefill_attention_pairs)

    async def _sleep_until(self, end_s: float) -> None:
        wait_s = (end_s - self.now_s()) / self.speedup
        # Always yield, so HTTP handlers run between steps even when the engine is behind the wall clock.
        await asyncio.sleep(max(0.0, wait_s))
        self.lag_s = max(0.0, self.now_s() - end_s)

    def _apply(self, plan: StepPlan, end_s: float) -> None:
        self.batch.step_end_s = end_s
        finished = self.planner.apply_step(plan)
        self.num_steps += 1
        first, self.batch.first_tokens = self.batch.first_tokens, []
        for request in first:  # before their finish: a one-token reply has both in one step
            self._notify("first_token", request)
        for request in finished:
            request.on_finish(end_s)
            self._notify("finish", request)

    @property
    def num_generation_tokens(self) -> int:
        """Tokens sampled so far, counted as each step samples them (vLLM's generation token counter)."""
        return self.batch.num_sampled_tokens

    def _notify(self, event: str, request: LiveRequest) -> None:
        for observer in self.observers:
            observer(event, request)
