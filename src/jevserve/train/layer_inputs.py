"""The hidden states entering the encoder's top layers, computed once per training state and kept on disk.

Fine-tuning only the top layers (train/tuned.py) needs, for every training state, the hidden states the frozen lower
layers give each of its encoder windows (the windows the tuned reader reads, decide/tuned.py `read_windows`). They
depend only on the text, the shipped weights and the layer, so they are stored per text: a shard of float16 rows per
run, found again by the text's digest, so adding states to the training data encodes only the new ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from jevserve.decide.onnx_build import cache_dir, graph_key
from jevserve.decide.token_embedder import READ_TOKENS
from jevserve.decide.tuned import read_windows

ENCODE_BATCH = 32  # windows per forward pass of the lower layers


def text_digest(text: str) -> str:
    """The key a text's hidden states are stored under."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


@dataclass
class LayerInputs:
    """Ragged hidden states: window w's rows are rows[window_offsets[w]:window_offsets[w + 1]], and text i's windows
    are window_offsets' entries text_windows[i]..text_windows[i + 1]."""

    rows: np.ndarray  # (total positions, 384) float16
    window_offsets: np.ndarray  # (num windows + 1,) int64
    text_windows: np.ndarray  # (num texts + 1,) int64

    def windows_of(self, i: int) -> list[np.ndarray]:
        """Text i's windows' hidden states, in order."""
        return [
            self.rows[self.window_offsets[w] : self.window_offsets[w + 1]]
            for w in range(self.text_windows[i], self.text_windows[i + 1])
        ]

    def num_positions(self, i: int) -> int:
        """Positions text i's windows hold."""
        return int(self.window_offsets[self.text_windows[i + 1]] - self.window_offsets[self.text_windows[i]])


def _shard_dir(first_layer: int) -> Path:
    return cache_dir() / "layer-inputs" / f"{graph_key()}-into{first_layer}-read{READ_TOKENS}"


def _load_shards(directory: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every stored text: digest → (its rows, its windows' lengths)."""
    found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for path in sorted(directory.glob("*.npz")):
        if path.name.endswith(".tmp.npz"):  # a shard still being written by another run
            continue
        with np.load(path) as shard:
            rows, lengths, counts = shard["rows"], shard["window_lengths"], shard["window_counts"]
            window_ends = np.concatenate([[0], np.cumsum(lengths)])
            text_ends = np.concatenate([[0], np.cumsum(counts)])
            for k, digest in enumerate(shard["digests"].tolist()):
                w0, w1 = text_ends[k], text_ends[k + 1]
                found[digest] = (rows[window_ends[w0] : window_ends[w1]], lengths[w0:w1])
    return found


def _encode(windows: list[list[int]], bert, first_layer: int, progress: bool) -> list[np.ndarray]:
    """The hidden states entering layer `first_layer` of each window (fp32 torch, run in batches of similar length;
    padding never reaches a real position: the attention mask keeps it out)."""
    out: list[np.ndarray | None] = [None] * len(windows)
    order = np.argsort([len(w) for w in windows], kind="stable")
    chunks = [order[i : i + ENCODE_BATCH] for i in range(0, len(order), ENCODE_BATCH)]
    with torch.no_grad():
        for chunk in tqdm(chunks, desc=f"hidden states entering layer {first_layer + 1}", disable=not progress):
            width = max(len(windows[w]) for w in chunk)
            ids = torch.zeros((len(chunk), width), dtype=torch.int64)
            mask = torch.zeros((len(chunk), width), dtype=torch.int64)
            for row, w in enumerate(chunk):
                ids[row, : len(windows[w])] = torch.tensor(windows[w])
                mask[row, : len(windows[w])] = 1
            hidden = bert(
                input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), output_hidden_states=True
            ).hidden_states[first_layer]
            for row, w in enumerate(chunk):
                out[w] = hidden[row, : len(windows[w])].numpy().astype(np.float16)
    return out  # type: ignore[return-value]


def layer_inputs(
    texts: Sequence[str], tokenizer, bert, first_layer: int, *, directory: Path | None = None, progress: bool = True
) -> LayerInputs:
    """The hidden states entering layer `first_layer` (0-based) for each text's read windows, from the store when
    there, else computed by `bert` (the shipped weights) and stored. `tokenizer` is the encoder's (tokenizers)."""
    directory = directory or _shard_dir(first_layer)
    directory.mkdir(parents=True, exist_ok=True)
    stored = _load_shards(directory)
    digests = [text_digest(t) for t in texts]
    missing = list(dict.fromkeys(d for d in digests if d not in stored))
    if missing:
        by_digest = {d: t for d, t in zip(digests, texts, strict=True)}
        cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
        encodings = tokenizer.encode_batch([by_digest[d] for d in missing], add_special_tokens=False)
        per_text = [read_windows(e.ids, cls_id, sep_id) for e in encodings]
        flat = [w for windows in per_text for w in windows]
        hidden = _encode(flat, bert, first_layer, progress)
        counts = np.array([len(w) for w in per_text], np.int64)
        shard = {
            "digests": np.array(missing),
            "rows": np.concatenate(hidden) if hidden else np.empty((0, 384), np.float16),
            "window_lengths": np.array([len(h) for h in hidden], np.int64),
            "window_counts": counts,
        }
        name = hashlib.sha256("".join(missing).encode()).hexdigest()[:16]
        tmp = directory / f"{name}.tmp.npz"
        np.savez(tmp, **shard)
        tmp.replace(directory / f"{name}.npz")
        stored = _load_shards(directory)
    rows, window_lengths, text_windows = [], [], [0]
    for d in digests:
        text_rows, lengths = stored[d]
        rows.append(text_rows)
        window_lengths.extend(lengths.tolist())
        text_windows.append(text_windows[-1] + len(lengths))
    return LayerInputs(
        rows=np.concatenate(rows) if rows else np.empty((0, 384), np.float16),
        window_offsets=np.concatenate([[0], np.cumsum(window_lengths)]).astype(np.int64),
        text_windows=np.array(text_windows, np.int64),
    )
