"""Errors of the serving policies.

    ServingError                  a policy was asked for, or given, something it cannot use
    ├── UnknownPolicyError        a policy name that is not registered
    ├── DuplicatePolicyError      a second registration under a name already taken
    ├── MissingPredictionError    a length-ordered policy met a request without the length it orders by
    └── SchedulerConfigError      engine scheduler settings that cannot work (`EngineConfig`)

All of them are `ValueError`s, so callers that validate configuration can catch one type.
"""

from __future__ import annotations


class ServingError(ValueError):
    """Base class of the serving-policy errors."""


class UnknownPolicyError(ServingError):
    """A policy name that is not in the registry."""


class DuplicatePolicyError(ServingError):
    """A policy name registered twice."""


class MissingPredictionError(ServingError):
    """A request lacks the predicted or true output length that its queue policy orders by."""


class SchedulerConfigError(ServingError):
    """Engine scheduler settings that cannot work."""
