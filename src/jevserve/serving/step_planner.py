"""The seam between vLLM's scheduling rules and what runs them: the simulator's engine, the router's TTFT
estimate and the live engine each drive a `StepPlanner`, so the scheduling loop exists once.

A driver owns the clock and the step times; the planner owns the requests, the running batch, the waiting queue
and the KV blocks, and decides each step. The driver's loop, in every caller:

    planner.add_request(request, now_s)          # whenever a request reaches the engine's queue
    plan = planner.plan_step(now_s)              # when no step is in flight
    ... the step takes the step-time model's time for plan's token counts ...
    finished = planner.apply_step(plan)          # when it ends; then plan the next one

The implementation with vLLM v1's rules is `jevserve.serving.vllm_planner.VllmStepPlanner`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.step_plan import StepPlan


class StepPlanner(ABC):
    """Plans an engine's steps, one at a time, and applies them when they end."""

    @abstractmethod
    def add_request(self, request: EngineRequest, now_s: float) -> None:
        """Queue a new request (or one the caller wants planned again) as waiting, ranked at `now_s`.

        The request must not be running or waiting already.
        """

    @abstractmethod
    def plan_step(self, now_s: float) -> StepPlan:
        """Plan the next step at `now_s`. Called by the driver's loop whenever no step is in flight.

        The planner decides how many tokens each running request computes (a prompt chunk, a recompute, or one
        decode token), preempts running requests when KV blocks run short, and admits waiting requests while
        the token budget, the batch cap and free blocks allow; it allocates the step's KV blocks now, as vLLM
        does. Admitted requests join the running batch and preempted ones go back to waiting before this
        returns. When a pass preempts every request it scheduled, the planner plans again at once, as vLLM's
        busy loop does, so an empty plan means there is nothing to run until a request arrives.

        The plan's rows are the first `num_rows` rows of the running batch; nothing may join or leave the
        running batch until `apply_step` is called with this plan.
        """

    @abstractmethod
    def apply_step(self, plan: StepPlan, num_steps: int = 1) -> list[EngineRequest]:
        """Apply a step that ended: add its tokens, sample a token for every request whose context is now
        computed, and remove the requests that produced their whole reply, freeing their KV blocks.

        `num_steps` > 1 applies a run of identical decode steps at once, which only a plan with `is_repeatable`
        allows: every request gains `num_steps` tokens, and the KV blocks those tokens fill after the first
        step are allocated now (the driver must have checked they fit). Returns the finished requests, in
        running order, with their progress written back.
        """

    @abstractmethod
    def abort(self, request: EngineRequest) -> bool:
        """Remove a running or waiting request (its client went away), freeing its KV blocks.

        Must not be called while a step holding the request is in flight. Returns False when the planner does
        not hold the request (it finished, or was never added).
        """

    @property
    @abstractmethod
    def num_running(self) -> int:
        """Requests in the running batch."""

    @property
    @abstractmethod
    def num_waiting(self) -> int:
        """Requests in the waiting queue (new or preempted)."""

    @abstractmethod
    def kv_cache_usage(self) -> float:
        """The fraction of KV blocks held by requests, 0 to 1 (vLLM's `kv_cache_usage_perc`, as a fraction)."""

    def has_unfinished_requests(self) -> bool:
        """True while any request is running or waiting."""
        return self.num_running + self.num_waiting > 0
