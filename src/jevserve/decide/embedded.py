"""The embedded models this package ships: what `jevserve serve` answers with when no model is named."""

from __future__ import annotations

from jevserve.decide.base import DecisionBackend
from jevserve.decide.embedder import Embedder
from jevserve.decide.encoder import TRAINED_HEAD, trained_backend, zero_shot_backend
from jevserve.decide.onnx_build import Precision


def embedded_backends(precision: Precision = "int8") -> list[DecisionBackend]:
    """The embedded default first (the trained readout when its weights ship), then the zero-shot readout.

    Both read the same encoder and share its embedding cache, so serving both costs one model.
    """
    embedder = Embedder(precision)
    backends: list[DecisionBackend] = []
    if TRAINED_HEAD.exists():
        backends.append(trained_backend(precision, embedder=embedder))
    backends.append(zero_shot_backend(precision, embedder=embedder))
    return backends
