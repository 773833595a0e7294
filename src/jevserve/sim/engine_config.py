"""The settings of one engine replica: `jevserve.serving.engine_config.EngineConfig`, the one config type the
simulator's engine and the router's forward estimate share, re-exported here with the simulator's model version."""

from __future__ import annotations

from jevserve.serving.engine_config import KV_ADMISSION_MODES, EngineConfig

__all__ = ["KV_ADMISSION_MODES", "SIM_MODEL_VERSION", "EngineConfig"]

# Bump when a change alters simulated results, so cached experiment results are not reused across versions.
SIM_MODEL_VERSION = 1
