"""The hidden states entering the encoder's top layers, computed once per training state and kept on disk.

Fine-tuning only the top layers (train/tuned.py) needs, for every training state, the hidden states the frozen lower
layers give each of its encoder windows (the windows the tuned reader reads, decide/tuned.py `read_windows`). They
are computed by the lower layers of the served int8 graph (decide/onnx_build.py, output "intoN": the same quantised
weights and kernels the served tuned graph runs below its tuned layers, one window at a time as served), so the
tuned layers train on the very inputs they get when served. They depend only on the text, the shipped weights and
the layer, so they are stored per text: a shard of float16 rows per run, found again by the text's digest, so adding
states to the training data encodes only the new ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from jevserve.decide.onnx_build import cache_dir, graph_key, onnx_path
from jevserve.decide.token_embedder import READ_TOKENS
from jevserve.decide.tuned import read_windows


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
    return cache_dir() / "layer-inputs" / f"{graph_key()}-into{first_layer}-int8-read{READ_TOKENS}"


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


def _encode(windows: list[list[int]], first_layer: int, progress: bool) -> list[np.ndarray]:
    """The hidden states entering layer `first_layer` of each window, by the int8 graph of the lower layers."""
    import onnxruntime as ort

    from jevserve.decide.embedder import default_num_threads

    options = ort.SessionOptions()
    options.intra_op_num_threads = default_num_threads()
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(onnx_path("int8", output=f"into{first_layer}")), options, providers=["CPUExecutionProvider"]
    )
    out = []
    for window in tqdm(windows, desc=f"hidden states entering layer {first_layer + 1}", disable=not progress):
        ids = np.asarray([window], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]
        out.append(hidden.astype(np.float16))
    return out


def layer_inputs(
    texts: Sequence[str], tokenizer, first_layer: int, *, directory: Path | None = None, progress: bool = True
) -> LayerInputs:
    """The hidden states entering layer `first_layer` (0-based) for each text's read windows, from the store when
    there, else computed and stored. `tokenizer` is the encoder's (tokenizers)."""
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
        hidden = _encode(flat, first_layer, progress)
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
