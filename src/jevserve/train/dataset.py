"""Embed every text the examples need once, with the served encoder, and index the examples into arrays."""

from __future__ import annotations

import hashlib
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
    rerun, a reproduction check or a retry after Ctrl-C reads it instead of encoding for minutes again."""
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
        vectors = np.empty((len(texts), 384), np.float32)
        for start in tqdm(range(0, len(texts), batch), desc="embedding", unit="batch", disable=not progress):
            vectors[start : start + batch] = embedder.embed(texts[start : start + batch])
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial.npy")
            np.save(partial, vectors)
            partial.replace(path)  # whole or not at all
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
