"""The embedded models this package ships: what `jevserve serve` answers with when no model is named."""

from __future__ import annotations

from jevserve.decide.base import DecisionBackend
from jevserve.decide.encoder import zero_shot_backend
from jevserve.decide.onnx_build import Precision


def embedded_backends(precision: Precision = "int8") -> list[DecisionBackend]:
    """The embedded default first, then other readouts over the same encoder (sharing its embeddings)."""
    return [zero_shot_backend(precision)]
