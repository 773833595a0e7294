"""Embed every text the examples need once, with the served encoder, and index the examples into arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from jevserve.decide.embedder import Embedder
from jevserve.protocol import DecisionQuestion
from jevserve.train.examples import Example


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
) -> EmbeddedExamples:
    """Embed each distinct state and question text once (the embedder's cache spans calls)."""
    index: dict[str, int] = {}
    for ex in examples:
        index.setdefault(ex.state, len(index))
        for text in texts_of(ex.question):
            index.setdefault(text, len(index))
    texts = list(index)
    vectors = np.empty((len(texts), 384), np.float32)
    for start in tqdm(range(0, len(texts), batch), desc="embedding", unit="batch", disable=not progress):
        vectors[start : start + batch] = embedder.embed(texts[start : start + batch])
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
