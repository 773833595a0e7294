"""The decisions of a serving stack as plain policies, shared by the simulator and the gateway, and the one step
planner of vLLM's scheduling that the simulator's engine, the TTFT estimate and the live engine run."""

from jevserve.serving.aging import RelativeAgingFirst, VirtualDeadlineFirst
from jevserve.serving.engine_config import EngineConfig
from jevserve.serving.engine_request import EngineRequest
from jevserve.serving.errors import (
    DuplicatePolicyError,
    MissingPredictionError,
    SchedulerConfigError,
    ServingError,
    UnknownPolicyError,
)
from jevserve.serving.queue import FirstComeFirstServed, PredictedLengthFirst, ShortestPromptFirst, TrueLengthFirst
from jevserve.serving.registry import (
    QUEUE_POLICIES,
    ROUTERS,
    make_queue_policy,
    make_router,
    queue_policy_names,
    register_queue_policy,
    register_router,
    router_names,
)
from jevserve.serving.routing import JoinShortestQueue, LatencyAware, LeastOutstandingTokens, RoundRobin, UtilityAware
from jevserve.serving.step_plan import StepPlan
from jevserve.serving.step_planner import StepPlanner
from jevserve.serving.ttft_estimate import (
    ReplicaModel,
    SchedulerLimits,
    estimate_ttft,
    estimate_ttft_queued_prefill,
)
from jevserve.serving.types import (
    Decision,
    QueuePolicy,
    ReplicaState,
    Request,
    ResidentRequest,
    Router,
    RunningColumns,
)
from jevserve.serving.vllm_planner import VllmStepPlanner

__all__ = [
    "QUEUE_POLICIES",
    "ROUTERS",
    "Decision",
    "DuplicatePolicyError",
    "EngineConfig",
    "EngineRequest",
    "FirstComeFirstServed",
    "JoinShortestQueue",
    "LatencyAware",
    "LeastOutstandingTokens",
    "MissingPredictionError",
    "PredictedLengthFirst",
    "QueuePolicy",
    "RelativeAgingFirst",
    "ReplicaModel",
    "ReplicaState",
    "Request",
    "ResidentRequest",
    "RoundRobin",
    "Router",
    "RunningColumns",
    "SchedulerConfigError",
    "SchedulerLimits",
    "ServingError",
    "ShortestPromptFirst",
    "StepPlan",
    "StepPlanner",
    "TrueLengthFirst",
    "UnknownPolicyError",
    "UtilityAware",
    "VirtualDeadlineFirst",
    "VllmStepPlanner",
    "estimate_ttft",
    "estimate_ttft_queued_prefill",
    "make_queue_policy",
    "make_router",
    "queue_policy_names",
    "register_queue_policy",
    "register_router",
    "router_names",
]
