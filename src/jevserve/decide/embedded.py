"""The embedded models this package ships: what `jevserve serve` answers with when no model is named."""

from __future__ import annotations

import hashlib

from jevserve.decide.base import DecisionBackend
from jevserve.decide.embedder import Embedder
from jevserve.decide.encoder import (
    LEXICAL_READER_NAME,
    LEXICAL_READER_WEIGHTS,
    READER_NAME,
    READER_WEIGHTS,
    TRAINED_HEAD,
    ZERO_SHOT_PARAMS,
    lexical_reader_backend,
    reader_backend,
    trained_backend,
    zero_shot_backend,
)
from jevserve.decide.onnx_build import Precision, graph_key
from jevserve.decide.tuned import TUNED_NAME, TUNED_WEIGHTS, tuned_backend, tuned_files


def embedded_backends(precision: Precision = "int8") -> list[DecisionBackend]:
    """The embedded default first: the reading model when its weights ship, then the trained readout when its
    weights ship, then the zero-shot readout (docs/training.md says why the reading model leads).

    The two readouts over the pooled vector share one encoder session and its cache. The reading model runs the
    token-state graph in its own session: its pooled vectors equal the pooled graph's (tests/decide/test_reader.py
    checks to 1e-6), but nothing guarantees that bit for bit, and the older rows must keep answering exactly as they
    were scored.
    """
    embedder = Embedder(precision)
    backends: list[DecisionBackend] = []
    if READER_WEIGHTS.exists():
        backends.append(reader_backend(precision))
    shared_tokens = backends[0].embedder if backends else None
    if LEXICAL_READER_WEIGHTS.exists():  # the two reading models share one token-state session (same answers)
        backends.append(lexical_reader_backend(precision, embedder=shared_tokens))
    if TUNED_WEIGHTS.exists():  # its question texts come from the same shipped token graph
        backends.append(tuned_backend(precision, texts=shared_tokens))
    if TRAINED_HEAD.exists():
        backends.append(trained_backend(precision, embedder=embedder))
    backends.append(zero_shot_backend(precision, embedder=embedder))
    return backends


def default_backend(precision: Precision = "int8") -> DecisionBackend:
    """Only the embedded default (what `embedded_backends()[0]` answers with), for callers that ask nothing else:
    they do not load the other models' encoder sessions."""
    if READER_WEIGHTS.exists():
        return reader_backend(precision)
    if TRAINED_HEAD.exists():
        return trained_backend(precision)
    return zero_shot_backend(precision)


def encoder_fingerprint(precision: Precision = "int8") -> str:
    """A short digest of the encoder graph the embedded models run (weights, build recipe, onnxruntime)."""
    return hashlib.sha256(f"{graph_key()}-{precision}".encode()).hexdigest()[:12]


def embedded_fingerprint(precision: Precision = "int8", model: str | None = None) -> str:
    """A short digest of everything an embedded model's answers depend on: its encoder graph and its parameter
    files. Caches of answers keyed by it are never reused across a change of either. The reading model
    (`model=READER_NAME`, or `LEXICAL_READER_NAME`) has its own, so retraining it leaves the others' caches valid."""
    reading = {READER_NAME: READER_WEIGHTS, LEXICAL_READER_NAME: LEXICAL_READER_WEIGHTS}
    if model == TUNED_NAME:  # its own graph (the tuned layers) and its readout
        digest = hashlib.sha256(f"{graph_key()}-tuned-{precision}".encode())
        for path in tuned_files(TUNED_WEIGHTS):
            digest.update(path.read_bytes() if path.exists() else b"-")
        return digest.hexdigest()[:12]
    if model in reading:
        digest = hashlib.sha256(f"{graph_key()}-tokens-{precision}".encode())
        digest.update(reading[model].read_bytes() if reading[model].exists() else b"-")
        return digest.hexdigest()[:12]
    digest = hashlib.sha256(encoder_fingerprint(precision).encode())
    for path in (TRAINED_HEAD, ZERO_SHOT_PARAMS):
        digest.update(path.read_bytes() if path.exists() else b"-")
    return digest.hexdigest()[:12]
