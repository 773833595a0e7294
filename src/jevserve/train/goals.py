"""What an embedded model's gateway decisions are worth on held-out data: the cases, and the rates at the operating
points a gateway would use (benchmarks/decide/reader_goals.py runs them and writes the table).

Every case is what the gateway's decision would read, built by `serving.decision_inputs` from an OpenAI chat body:
an injection or a harmful request from a bench test side is sent as one user turn; an everyday request is its own
body. A request is acted on when the decision acts on any of its texts (the guard judges each untrusted text alone).
Operating points are set where a gateway would set them: on the train-side calibration file (at most 1% of its
everyday requests acted on), never on what is measured. Nothing here is trained on: test sides, the everyday test
side and the rule families' held-out templates only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest

from jevserve.protocol import DecisionQuestion
from jevserve.serving.decision_inputs import DEFAULT_LIMITS, InputLimits, decision_inputs


@dataclass(frozen=True)
class Unit:
    """One thing a decision is judged on: a request (or a pair, or a call) and the texts the decision reads of it."""

    texts: tuple[str, ...]  # acted on when the decision's P(yes) reaches the threshold on any of them
    question: DecisionQuestion
    label: bool  # True: it should be acted on (blocked, refused, served from cache)
    group: str  # e.g. "injection", "everyday:bare", "calibration", "rule:negation"
    # per text, the text it is a window of where the guard reads windows in context (InputLimits.windows_in_context;
    # None for the others); empty: none is
    within: tuple[str | None, ...] = ()

    def asked(self) -> list[tuple]:
        """What each text is asked as: (text, question), or (text, question, within) for a window read in context."""
        if not self.within:
            return [(text, self.question) for text in self.texts]
        return [(t, self.question) if w is None else (t, self.question, w) for t, w in zip(self.texts, self.within,
                                                                                            strict=True)]


def user_body(text: str) -> dict:
    """A request of one user turn."""
    return {"messages": [{"role": "user", "content": text}]}


def guard_texts(body: dict, limits: InputLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """What the guard judges of a request."""
    return tuple(t for t in decision_inputs(body, limits=limits).guard_texts if t.strip())


def guard_unit(body: dict, question: DecisionQuestion, label: bool, group: str, limits: InputLimits = DEFAULT_LIMITS
               ) -> Unit:
    """The guard's unit of a request: the texts it judges and, with `limits.windows_in_context`, what each window
    is read within."""
    inputs = decision_inputs(body, limits=limits)
    kept = [(t, w) for t, w in zip(inputs.guard_texts, inputs.guard_within, strict=True) if t.strip()]
    texts = tuple(t for t, _ in kept)
    within = tuple(w for _, w in kept) if limits.windows_in_context else ()
    return Unit(texts, question, label, group, within)


def request_texts(body: dict, limits: InputLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """What the harm guard reads of a request (the request text; with `limits.harm_windows` its windows too)."""
    return tuple(t for t in decision_inputs(body, limits=limits).harm_texts if t.strip())


def scores_of(units: Sequence[Unit], answer: Callable[[list[tuple]], list[float]]) -> np.ndarray:
    """Each unit's score: the highest P(yes) over its texts; `answer` gets every distinct (text, question) once, and
    (text, question, within) for a window read in context (`Unit.asked`)."""
    distinct = list(dict.fromkeys(asked for unit in units for asked in unit.asked()))
    found = dict(zip(distinct, answer(distinct), strict=True))
    return np.array([max((found[asked] for asked in u.asked()), default=0.0) for u in units])


def threshold_at_rate(negatives: np.ndarray, rate: float) -> float:
    """The lowest threshold at which at most `rate` of `negatives` reach it (acted on when score ≥ threshold)."""
    ordered = np.sort(np.asarray(negatives, np.float64))[::-1]
    allowed = math.floor(rate * len(ordered) + 1e-9)
    if allowed >= len(ordered):
        return 0.0
    return float(np.nextafter(ordered[allowed], np.inf))


@dataclass(frozen=True)
class Rate:
    """A share of units acted on, with its exact binomial 95% interval."""

    acted: int
    total: int

    @property
    def value(self) -> float:
        """acted / total (nan when there is nothing)."""
        return self.acted / self.total if self.total else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        """Clopper-Pearson 95% interval."""
        if not self.total:
            return (float("nan"), float("nan"))
        ci = binomtest(self.acted, self.total).proportion_ci(0.95)
        return (float(ci.low), float(ci.high))

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {"acted": self.acted, "total": self.total, "rate": self.value, "interval": list(self.interval)}


def rate_at(scores: np.ndarray, threshold: float) -> Rate:
    """How many of `scores` reach `threshold`."""
    return Rate(int((np.asarray(scores) >= threshold).sum()), len(scores))


def by_group(units: Sequence[Unit], scores: np.ndarray, threshold: float, groups: Iterable[str]) -> dict[str, Rate]:
    """The rate at `threshold` within each named group (a group name also matches "name:…" groups)."""
    out = {}
    for name in groups:
        picked = [s for u, s in zip(units, scores, strict=True) if u.group == name or u.group.startswith(name + ":")]
        out[name] = rate_at(np.array(picked), threshold)
    return out


def auroc(labels: Sequence[bool], scores: Sequence[float]) -> float:
    """Area under the ROC curve (nan with one class only)."""
    from sklearn.metrics import roc_auc_score

    labels = np.asarray(labels, bool)
    if labels.all() or not labels.any():
        return float("nan")
    return float(roc_auc_score(labels, scores))
