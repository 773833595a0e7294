"""Errors of the simulator; each message names the field at fault, shows the value and says what is accepted.

    SimError                 base class (a ValueError, so configuration checks can catch one type)
    ├── ProfileError         a step-time / memory profile file that is missing, malformed or out of range
    ├── WorkloadError        a workload (ShareGPT counts, synthetic distribution, predictions file) that cannot be used
    ├── TraceError           a trace or step log file (JSONL/CSV) with a bad row
    └── EngineConfigError    engine settings that cannot work (e.g. a request larger than the KV cache)
"""

from __future__ import annotations


class SimError(ValueError):
    """Base class of the simulator's errors."""


class ProfileError(SimError):
    """A profile that cannot be loaded or used."""


class WorkloadError(SimError):
    """A workload that cannot be built."""


class TraceError(SimError):
    """A trace or step-log row that cannot be read."""


class EngineConfigError(SimError):
    """Engine settings that cannot work."""
