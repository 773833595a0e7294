"""Embed every text the examples need once, with the served encoder, and index the examples into arrays."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from jevserve.decide.embedder import Embedder
from jevserve.decide.onnx_build import cache_dir
from jevserve.protocol import DecisionQuestion
from jevserve.train.examples import Example

STORE_VERSION = 1  # part of a stored matrix's key: raise it when the embedding of a text changes in code


def embeddings_store() -> Path:
    """Where training runs keep their embedding matrices: $JEVSERVE_CACHE/train-embeddings."""
    return cache_dir() / "train-embeddings"


@dataclass
class EmbeddedExamples:
    """Examples with their texts replaced by rows of one embedding matrix."""

    vectors: np.ndarray  # (num_texts, 384), unit rows
    state_rows: np.ndarray  # (n,) row of each example's state
    text_rows: list[np.ndarray]  # per example, the rows of the readout's texts for its question
    questions: list[DecisionQuestion]
    answers: np.ndarray  # (n,) right option index
    families: list[str]


PARTIAL_SAVE_S = 60.0  # how often a pass under way keeps what it has embedded (and at Ctrl-C)


class KeptAsItGoes:
    """A long pass's keeper: `tick()` after each step calls `keep` once PARTIAL_SAVE_S have passed since the last
    time, and leaving the `with` block on Ctrl-C calls it once more, so the same command goes on from what was done."""

    def __init__(self, keep: Callable[[], None], every_s: float = PARTIAL_SAVE_S) -> None:
        self.keep, self.every_s = keep, every_s
        self.saved_at = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self.saved_at > self.every_s:
            self.keep()
            self.saved_at = time.monotonic()

    def __enter__(self) -> KeptAsItGoes:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is KeyboardInterrupt:
            self.keep()


def _embed_resumably(texts: list[str], embedder: Embedder, *, batch: int, progress: bool,
                     path: Path | None) -> np.ndarray:
    vectors = np.empty((len(texts), 384), np.float32)
    partial = None if path is None else path.with_name(f"{path.stem}.partial.npz")
    done = 0
    if partial is not None and partial.exists():
        try:
            with np.load(partial) as saved:
                if saved["vectors"].shape == vectors.shape:  # the key names every text: the same texts in order
                    done = int(saved["done"])
                    vectors[:done] = saved["vectors"][:done]
        except (OSError, ValueError, KeyError):
            done = 0  # a save cut short: start again

    def keep() -> None:
        if partial is not None and done:
            partial.parent.mkdir(parents=True, exist_ok=True)
            tmp = partial.with_name(f"{partial.stem}.tmp.npz")
            np.savez(tmp, vectors=vectors, done=done)
            tmp.replace(partial)

    num_batches = -(-len(texts) // batch)
    with KeptAsItGoes(keep) as kept:
        for start in tqdm(range(done, len(texts), batch), desc="embedding", unit="batch", disable=not progress,
                          initial=done // batch, total=num_batches):
            vectors[start : start + batch] = embedder.embed(texts[start : start + batch])
            done = min(start + batch, len(texts))
            kept.tick()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        whole = path.with_name(f"{path.stem}.whole.npy")
        np.save(whole, vectors)
        whole.replace(path)  # whole or not at all
        if partial is not None:
            partial.unlink(missing_ok=True)
    return vectors


def embed_examples(
    examples: Sequence[Example],
    texts_of: Callable[[DecisionQuestion], list[str]],
    embedder: Embedder,
    *,
    batch: int = 256,
    progress: bool = True,
    store: Path | None = None,
) -> EmbeddedExamples:
    """Embed each distinct state and question text once (the embedder's cache spans calls). With `store` (a folder),
    the embedding matrix is kept there between runs, keyed by the embedder's identity and every text in order: a
    rerun or a reproduction check reads it instead of encoding for minutes again, and a pass stopped midway (Ctrl-C,
    or a kill after its last save) goes on from the texts it had embedded."""
    index: dict[str, int] = {}
    for ex in examples:
        index.setdefault(ex.state, len(index))
        for text in texts_of(ex.question):
            index.setdefault(text, len(index))
    texts = list(index)
    identity = getattr(embedder, "identity", None)
    path = None
    if store is not None and identity is not None:
        digest = hashlib.sha256(f"{STORE_VERSION}|{identity}".encode())
        digest.update("\x1e".join(texts).encode("utf-8", "surrogatepass"))
        path = store / f"{digest.hexdigest()[:24]}.npy"
    if path is not None and path.exists():
        vectors = np.load(path)
    else:
        vectors = _embed_resumably(texts, embedder, batch=batch, progress=progress, path=path)
    return EmbeddedExamples(
        vectors=vectors,
        state_rows=np.array([index[ex.state] for ex in examples], dtype=np.int64),
        text_rows=[np.array([index[t] for t in texts_of(ex.question)], dtype=np.int64) for ex in examples],
        questions=[ex.question for ex in examples],
        answers=np.array([ex.answer for ex in examples], dtype=np.int64),
        families=[ex.family for ex in examples],
    )


def subset(data: EmbeddedExamples, keep: np.ndarray) -> EmbeddedExamples:
    """The examples at indices `keep` (sharing the embedding matrix)."""
    return EmbeddedExamples(
        vectors=data.vectors,
        state_rows=data.state_rows[keep],
        text_rows=[data.text_rows[i] for i in keep],
        questions=[data.questions[i] for i in keep],
        answers=data.answers[keep],
        families=[data.families[i] for i in keep],
    )
