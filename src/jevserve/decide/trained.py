"""The trained readout: a small network that scores (state, question, option) triples from frozen embeddings.

For each option k of a question it builds the features

    φₖ = [s⊙oₖ, s⊙q, oₖ⊙q, s, q, oₖ, kind one-hot (3), level position]

from the unit embeddings of the state s, the instructions q (zeros when there are none) and the option text oₖ
("name: description", the level text, or "yes: <true criterion>"/"no: <false criterion>"), scores it with a
two-layer perceptron (GELU), and takes a softmax over the question's own options with a per-type temperature. So it
answers any option set; the scores of one option never depend on another option's position (only score levels carry
their position, which is part of a score question's meaning), on other questions or on the batch.

Weights live in a small .npz with a JSON manifest beside it (data, seeds, versions), written by `jevserve train`.
Inference is plain numpy.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jevserve.protocol import DecisionQuestion

KINDS = ("noul", "choice", "score")
EMBEDDING_DIM = 384
NUM_FEATURES = 6 * EMBEDDING_DIM + len(KINDS) + 1


def option_text(label: str, description: str) -> str:
    """The text embedded for one option."""
    return f"{label}: {description}" if description else label


def question_texts(question: DecisionQuestion) -> list[str]:
    """The texts the trained readout embeds for a question: the instructions, then one per option."""
    return [question.instructions, *(option_text(o.label, o.description) for o in question.options)]


def question_parts(
    text_vectors: np.ndarray, question: DecisionQuestion
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per option of one question: its vector, the instructions' vector (zeros when there are none), the kind
    one-hot and the level position (score questions only); `text_vectors` follows `question_texts`."""
    q = text_vectors[0] if question.instructions else np.zeros(EMBEDDING_DIM, np.float32)
    options = text_vectors[1:]
    n = len(options)
    kind = np.zeros((n, len(KINDS)), np.float32)
    kind[:, KINDS.index(question.kind)] = 1.0
    position = np.zeros((n, 1), np.float32)
    if question.kind == "score" and n > 1:
        position[:, 0] = np.arange(n) / (n - 1)
    return options, np.broadcast_to(q, (n, EMBEDDING_DIM)), kind, position


def features(state: np.ndarray, text_vectors: np.ndarray, question: DecisionQuestion) -> np.ndarray:
    """The (options × NUM_FEATURES) feature matrix of one question; `text_vectors` follows `question_texts`."""
    options, qq, kind, position = question_parts(text_vectors, question)
    s = np.broadcast_to(state, options.shape)
    return np.concatenate([s * options, s * qq, options * qq, s, qq, options, kind, position], axis=1).astype(
        np.float32
    )


def _gelu(x: np.ndarray) -> np.ndarray:
    # tanh approximation, the same one the training code uses (torch's approximate="tanh")
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def tempered_softmax(logits: np.ndarray, temperatures: dict[str, float], kind: str) -> np.ndarray:
    """Probabilities over a question's own options, the logits divided by the temperature fitted for its type."""
    return softmax_at(logits, temperatures.get(kind, 1.0))


def softmax_at(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities over a question's own options, the logits divided by `temperature`."""
    z = logits.astype(np.float64) / temperature
    z -= z.max()
    e = np.exp(z)
    return e / e.sum()


@functools.lru_cache(maxsize=4096)  # asked several times per item; a pure function of a frozen question
def question_key(question: DecisionQuestion) -> str:
    """A short fingerprint of everything a model reads of a question (type, instructions, options in order): the
    key of per-question calibration. Ids never enter a DecisionQuestion, so equal questions share a key."""
    parts = [question.kind, question.instructions, [[o.label, o.description] for o in question.options]]
    return hashlib.sha1(json.dumps(parts, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class HeadWeights:
    """The perceptron's parameters and the per-type temperatures."""

    w1: np.ndarray  # (NUM_FEATURES, hidden)
    b1: np.ndarray  # (hidden,)
    w2: np.ndarray  # (hidden,)
    b2: float
    temperatures: dict[str, float]  # per question type, fitted on held-out train data after training

    @classmethod
    def load(cls, path: Path) -> HeadWeights:
        """Read weights written by `save`."""
        with np.load(path) as data:
            temps = json.loads(str(data["temperatures"]))
            return cls(data["w1"], data["b1"], data["w2"], float(data["b2"]), temps)

    def save(self, path: Path) -> None:
        """Write the weights as float32 arrays (the file stays a few MB)."""
        np.savez_compressed(
            path,
            w1=self.w1.astype(np.float32),
            b1=self.b1.astype(np.float32),
            w2=self.w2.astype(np.float32),
            b2=np.float32(self.b2),
            temperatures=json.dumps(self.temperatures),
        )


class TrainedReadout:
    """Softmax over the perceptron's option scores; a `Readout` for `EncoderBackend`."""

    def __init__(self, weights: HeadWeights) -> None:
        self.weights = weights

    def texts(self, question: DecisionQuestion) -> list[str]:
        """The instructions and the option texts."""
        return question_texts(question)

    def logits(self, state: np.ndarray, text_vectors: np.ndarray, question: DecisionQuestion) -> np.ndarray:
        """Unnormalised option scores before the temperature."""
        w = self.weights
        hidden = _gelu(features(state, text_vectors, question) @ w.w1 + w.b1)
        return hidden @ w.w2 + w.b2

    def probabilities(self, state: np.ndarray, text_vectors: np.ndarray, question: DecisionQuestion) -> np.ndarray:
        """One probability per option."""
        return tempered_softmax(self.logits(state, text_vectors, question), self.weights.temperatures, question.kind)
