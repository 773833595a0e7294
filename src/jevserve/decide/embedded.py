"""The embedded models this package ships: what `jevserve serve` answers with when no model is named."""

from __future__ import annotations

import hashlib

from jevserve.decide.base import DecisionBackend
from jevserve.decide.embedder import Embedder
from jevserve.decide.encoder import TRAINED_HEAD, ZERO_SHOT_PARAMS, trained_backend, zero_shot_backend
from jevserve.decide.onnx_build import Precision, graph_key


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


def encoder_fingerprint(precision: Precision = "int8") -> str:
    """A short digest of the encoder graph the embedded models run (weights, build recipe, onnxruntime)."""
    return hashlib.sha256(f"{graph_key()}-{precision}".encode()).hexdigest()[:12]


def embedded_fingerprint(precision: Precision = "int8") -> str:
    """A short digest of everything the embedded models' answers depend on: the encoder graph and the readouts'
    parameter files. Caches of answers keyed by it are never reused across a change of either."""
    digest = hashlib.sha256(encoder_fingerprint(precision).encode())
    for path in (TRAINED_HEAD, ZERO_SHOT_PARAMS):
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()[:12]
