"""The embedded encoder with its token states: what the reading model (decide/reader.py) attends over.

Same weights, recipe and windows as `Embedder`, from a graph that stops before the pooling (onnx_build,
`output="tokens"`). The sentence vector is the mean of the token states over all windows, as the pooled graph
computes it, so one encoder pass per state gives both. Every window runs on its own (int8 activations are quantised
per tensor, so a padded companion would change a text's states), which costs nothing on 2 cores (embedder.py).
"""

from __future__ import annotations

import threading

import numpy as np

from jevserve.decide.embedder import EMBEDDING_DIM, WINDOW_TOKENS, Embedder, LRUCache, _Warming
from jevserve.decide.onnx_build import Precision

READ_TOKENS = 512  # token states the reader attends over: the first 512 positions ([CLS]/[SEP] of each window count)


def window_rows(spans: np.ndarray, start: int, end: int) -> np.ndarray:
    """The rows of a text's token states (laid out window by window: [CLS], up to 254 word pieces, [SEP], ...) that
    hold the word pieces whose characters lie in [start, end), given each word piece's (start, end) in `spans`."""
    inside = np.flatnonzero((spans[:, 0] >= start) & (spans[:, 1] <= end))
    return (inside // WINDOW_TOKENS) * (WINDOW_TOKENS + 2) + 1 + inside % WINDOW_TOKENS


def rows_within(states: np.ndarray, spans: np.ndarray, window: str, text: str) -> np.ndarray | None:
    """The token states of `window`'s word pieces where it first occurs in `text`, read from `text`'s `states`; None
    when it does not occur, holds no whole word piece, or reaches past the positions read."""
    start = text.find(window)
    if start < 0 or not window:
        return None
    rows = window_rows(spans, start, start + len(window))
    if len(rows) == 0 or rows[-1] >= len(states):
        return None
    return states[rows]


def unit_vector(states: np.ndarray) -> np.ndarray:
    """The unit-length mean of token states (float32)."""
    mean = states.mean(0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)


class TokenEmbedder(Embedder):
    """Unit sentence vectors (`embed`) and the first `read_tokens` token states (`token_states`) of texts."""

    def __init__(
        self,
        precision: Precision = "int8",
        *,
        read_tokens: int = READ_TOKENS,
        state_cache_size: int = 64,
        **kwargs,
    ) -> None:
        super().__init__(precision, output="tokens", **kwargs)
        self.read_tokens = read_tokens
        self.state_cache = LRUCache(state_cache_size)
        # The windows' token states of the text `_embed_uncached` is encoding, per thread: one embedder serves several
        # models (each answering in its own batcher thread), and an instance attribute was overwritten by another
        # model's run between this thread's encoding and its read (wrong answers, and 500s on an empty list).
        self._runs = threading.local()

    def token_states(self, text: str) -> np.ndarray:
        """(min(positions, read_tokens), 384) float32 token states of `text`'s windows in order (read-only)."""
        cached = self.state_cache.get(text)
        if cached is not None:
            return cached
        pooled = self._embed_uncached([text])[0]
        states = np.concatenate(self._runs.window_states)[: self.read_tokens].copy()
        self.cache.put(text, pooled)
        self.state_cache.put(text, states)
        return states

    def _is_warm(self, text: str, token_states: bool) -> bool:
        return super()._is_warm(text, token_states) and (not token_states or self.state_cache.get(text) is not None)

    def _warm_window(self, entry: _Warming, token_states: bool) -> np.ndarray:
        pooled = super()._warm_window(entry, token_states)
        if token_states and sum(len(h) for h in entry.kept) < self.read_tokens:
            entry.kept.append(self._runs.window_states[0])
        return pooled

    def _put_warmed(self, text: str, entry: _Warming, token_states: bool) -> None:
        super()._put_warmed(text, entry, token_states)
        if token_states:  # as token_states keeps them: the first `read_tokens` rows of the windows in order
            self.state_cache.put(text, np.concatenate(entry.kept)[: self.read_tokens].copy())

    def _run_windows(self, windows: list[list[int]]) -> np.ndarray:
        pooled = np.empty((len(windows), EMBEDDING_DIM), dtype=np.float32)
        window_states = []
        for i, ids in enumerate(windows):
            arr = np.asarray([ids], dtype=np.int64)
            hidden = self.session.run(None, {"input_ids": arr, "attention_mask": np.ones_like(arr)})[0][0]
            pooled[i] = hidden.mean(0)
            window_states.append(hidden)
        self._runs.window_states = window_states
        return pooled

