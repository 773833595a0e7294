"""Token states of every training state, computed once and kept on disk, for training the reading model.

17k training states take a few minutes to encode on 2 cores; the reader's recipe is tried many times, so the
states are stored (float16, ragged: one array of rows and an offset per state) under the cache directory, keyed by
the encoder graph and the exact list of state texts. Float16 keeps the file near 1 GB; the reader is trained on
these rounded states and serves the float32 ones (the rounding is ~1e-3 relative, far below what the readout
resolves).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from jevserve.decide.lexical import WordBags
from jevserve.decide.onnx_build import cache_dir, graph_key
from jevserve.decide.token_embedder import TokenEmbedder


@dataclass
class TokenStates:
    """Ragged token states: rows[offsets[i]:offsets[i + 1]] are text i's states."""

    rows: np.ndarray  # (total positions, 384) float16
    offsets: np.ndarray  # (num texts + 1,) int64
    bags: WordBags | None = None  # the same texts' word bags, for a reader with a lexical channel (decide/lexical.py)

    def of(self, i: int) -> np.ndarray:
        """Text i's token states."""
        return self.rows[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        """Positions per text."""
        return np.diff(self.offsets)


def _key(texts: Sequence[str], embedder: TokenEmbedder) -> str:
    digest = hashlib.sha256(f"{graph_key()}-tokens-{embedder.precision}-{embedder.read_tokens}".encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\x1e")
    return digest.hexdigest()[:16]


def token_states(
    texts: Sequence[str], embedder: TokenEmbedder, *, directory: Path | None = None, progress: bool = True
) -> TokenStates:
    """The token states of `texts` in order, from the disk cache when the same texts were encoded before."""
    directory = directory or cache_dir() / "token-states"
    path = directory / f"{_key(texts, embedder)}.npz"
    if path.exists():
        with np.load(path) as data:
            return TokenStates(data["rows"], data["offsets"])
    parts = []
    for text in tqdm(texts, desc="token states", unit="state", disable=not progress):
        parts.append(embedder.token_states(text).astype(np.float16))
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
    result = TokenStates(np.concatenate(parts) if parts else np.empty((0, 384), np.float16), offsets)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, rows=result.rows, offsets=result.offsets)
    tmp.replace(path)
    return result
