"""The decisions of a serving stack as plain policies, shared by the simulator and the gateway."""

from jevserve.serving.errors import DuplicatePolicyError, MissingPredictionError, ServingError, UnknownPolicyError
from jevserve.serving.queue import FirstComeFirstServed, PredictedLengthFirst, ShortestPromptFirst, TrueLengthFirst
from jevserve.serving.registry import QUEUE_POLICIES, make_queue_policy, queue_policy_names, register_queue_policy
from jevserve.serving.types import Decision, QueuePolicy, ReplicaState, Request, ResidentRequest

__all__ = [
    "QUEUE_POLICIES",
    "Decision",
    "DuplicatePolicyError",
    "FirstComeFirstServed",
    "MissingPredictionError",
    "PredictedLengthFirst",
    "QueuePolicy",
    "ReplicaState",
    "Request",
    "ResidentRequest",
    "ServingError",
    "ShortestPromptFirst",
    "TrueLengthFirst",
    "UnknownPolicyError",
    "make_queue_policy",
    "queue_policy_names",
    "register_queue_policy",
]
