"""Capacity planning from queueing theory, checked against the simulator (`jevserve plan`).

Exports load lazily, so `import jevserve.plan` (and `jevserve --help`) does not pull in numpy and scipy.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "CapacityModel": "jevserve.plan.planner",
    "Plan": "jevserve.plan.planner",
    "PlanError": "jevserve.plan.planner",
    "ReplicaCapacity": "jevserve.plan.planner",
    "plan_for": "jevserve.plan.planner",
    "plan_replicas": "jevserve.plan.planner",
    "StabilityBound": "jevserve.plan.bound",
    "stability_bound": "jevserve.plan.bound",
    "Demand": "jevserve.plan.demand",
    "request_demand": "jevserve.plan.demand",
    "erlang_c": "jevserve.plan.waiting",
    "slo_attainment": "jevserve.plan.waiting",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'jevserve.plan' has no attribute {name!r}")
