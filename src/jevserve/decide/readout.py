"""Readouts: how a decision is read from embeddings of the state, the instructions and the options.

A readout names the texts it needs embedded for a question (`texts`), and turns the state's embedding and those
texts' embeddings into one probability per option (`probabilities`). It sees nothing but the question itself, so
answers cannot depend on ids, order or companions.

The zero-shot readout compares the state with one *hypothesis* per option, by cosine similarity:

- choice and score: hypothesis k = instructions + option k ("name: description" for choices, the level text for
  scores); p = softmax(cos / T), one temperature per type.
- noul: the yes-hypothesis is the instructions plus the true criterion, the no-hypothesis the false criterion. With
  both sides, p = σ(a·(cos_yes − cos_no) + b); with one side, p = σ(±a·(cos_side − c)), where c is the similarity
  at which the answer is even.

Its parameters (T, a, b, c) are fitted by `jevserve.decide.calibrate` on documented data and stored as JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from jevserve.protocol import DecisionQuestion


class Readout(Protocol):
    """Turns embeddings into probabilities for one question."""

    def texts(self, question: DecisionQuestion) -> list[str]:
        """The texts whose embeddings `probabilities` needs, in the order it expects them."""
        ...

    def probabilities(self, state: np.ndarray, text_vectors: np.ndarray, question: DecisionQuestion) -> np.ndarray:
        """One probability per option, summing to 1."""
        ...


@dataclass(frozen=True)
class ZeroShotParams:
    """Fitted constants of the zero-shot readout."""

    choice_temperature: float = 0.05  # softmax temperature over cosine similarities, choice questions
    score_temperature: float = 0.05  # the same for score levels
    noul_scale: float = 20.0  # a: logit per unit of cosine difference
    noul_bias: float = 0.0  # b: two-sided nouls
    noul_threshold: float = 0.3  # c: cosine at which a one-sided noul is even

    @classmethod
    def load(cls, path: Path) -> ZeroShotParams:
        """Read parameters from a JSON file written by `save`."""
        data = json.loads(Path(path).read_text())
        return cls(**data["params"])

    def save(self, path: Path, **provenance: object) -> None:
        """Write the parameters with where they came from."""
        Path(path).write_text(json.dumps({"params": asdict(self), "provenance": provenance}, indent=2) + "\n")


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def _option_text(label: str, description: str) -> str:
    return f"{label}: {description}" if description else label


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max()
    e = np.exp(z)
    return e / e.sum()


def _sigmoid(x: float) -> float:
    return float(1.0 / (1.0 + np.exp(-x)))


class ZeroShotReadout:
    """Cosine similarity between the state and one hypothesis per option, calibrated by a few constants."""

    def __init__(self, params: ZeroShotParams | None = None) -> None:
        self.params = params or ZeroShotParams()

    def texts(self, question: DecisionQuestion) -> list[str]:
        """Hypothesis texts: one per option (noul: the sides that exist, yes first)."""
        instr = question.instructions
        if question.kind == "noul":
            yes, no = question.options
            texts = []
            if instr or yes.description:
                texts.append(_join(instr, yes.description))
            if no.description:
                texts.append(no.description)
            return texts
        return [_join(instr, _option_text(o.label, o.description)) for o in question.options]

    def probabilities(self, state: np.ndarray, text_vectors: np.ndarray, question: DecisionQuestion) -> np.ndarray:
        """Softmax over hypothesis similarities (choice, score) or a calibrated sigmoid (noul)."""
        p = self.params
        if len(text_vectors) == 0:  # a noul with neither instructions nor criteria: nothing to read
            return np.full(question.num_options, 1.0 / question.num_options)
        sims = text_vectors @ state
        if question.kind == "noul":
            yes, no = question.options
            has_yes = bool(question.instructions or yes.description)
            if has_yes and no.description:
                p_yes = _sigmoid(p.noul_scale * float(sims[0] - sims[1]) + p.noul_bias)
            elif has_yes:
                p_yes = _sigmoid(p.noul_scale * float(sims[0] - p.noul_threshold))
            else:
                p_yes = _sigmoid(-p.noul_scale * float(sims[0] - p.noul_threshold))
            return np.array([p_yes, 1.0 - p_yes])
        temperature = p.choice_temperature if question.kind == "choice" else p.score_temperature
        return _softmax(sims.astype(np.float64) / temperature)
