"""Discrete-event simulation of vLLM-like engine replicas: step-time profiles, workloads, arrivals, metrics.

Exports load lazily, so `import jevserve.sim` (and `jevserve --help`) does not pull in numpy and scipy.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Engine": "jevserve.sim.engine",
    "EngineConfig": "jevserve.sim.engine",
    "Simulator": "jevserve.sim.loop",
    "Profile": "jevserve.sim.profile",
    "load_profile": "jevserve.sim.profile",
    "shipped_profile_names": "jevserve.sim.profile",
    "StepTimeModel": "jevserve.sim.step_time",
    "SimRequest": "jevserve.sim.entities",
    "Arrival": "jevserve.sim.events",
    "Observer": "jevserve.sim.observer",
    "MetricsRecorder": "jevserve.sim.metrics",
    "Slo": "jevserve.sim.metrics",
    "summarize": "jevserve.sim.metrics",
    "simulate": "jevserve.sim.run",
    "with_arrivals": "jevserve.sim.run",
    "make_arrivals": "jevserve.sim.arrivals",
    "sample_sharegpt": "jevserve.sim.workloads.sharegpt",
    "sharegpt_split": "jevserve.sim.workloads.sharegpt",
    "fit_step_time": "jevserve.sim.calibrate",
    "SimError": "jevserve.sim.errors",
    "WorkCounter": "jevserve.sim.work",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'jevserve.sim' has no attribute {name!r}")
