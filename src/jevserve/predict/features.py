"""Numbers from System One answers: every probability of a fixed question set, in a fixed order.

A predictor fitted on answers must read the same column for the same option every time, whatever order the
endpoint returned keys in. So columns follow the question set as asked: per question, a noul gives P(true), a
choice one probability per option in the order of its criteria, a score one probability per level and the
expected level. A missing answer (the endpoint refused the request) gives the uniform answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def feature_names(questions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Column names of `answer_features` for this question set, e.g. "code", "kind=list", "length[2]"."""
    names: list[str] = []
    for qid, question in questions.items():
        kind = question["type"]
        if kind == "noul":
            names.append(qid)
        elif kind == "choice":
            names += [f"{qid}={option}" for option in question["criteria"]]
        elif kind == "score":
            names += [f"{qid}[{level}]" for level in range(len(question["criteria"]))] + [f"{qid}.expected"]
        else:
            raise ValueError(f"question {qid!r} has type {kind!r}; expected noul, choice or score")
    return names


def _columns(question: Mapping[str, Any], answer: Mapping[str, Any] | None) -> list[float]:
    kind = question["type"]
    if kind == "noul":
        return [float(answer["noul"]) if answer else 0.5]
    if kind == "choice":
        options = list(question["criteria"])
        if not answer:
            return [1.0 / len(options)] * len(options)
        return [float(answer["probabilities"][option]) for option in options]
    levels = len(question["criteria"])
    probabilities = (
        [float(answer["probabilities"][str(i)]) for i in range(levels)] if answer else [1.0 / levels] * levels
    )
    return [*probabilities, float(np.dot(np.arange(levels), probabilities))]


def answer_features(
    questions: Mapping[str, Mapping[str, Any]], answers: Sequence[Mapping[str, Mapping[str, Any]] | None]
) -> np.ndarray:
    """An (items × features) matrix; columns as `feature_names(questions)`."""
    rows = []
    for item_answers in answers:
        row: list[float] = []
        for qid, question in questions.items():
            row += _columns(question, item_answers.get(qid) if item_answers else None)
        rows.append(row)
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), len(feature_names(questions)))
