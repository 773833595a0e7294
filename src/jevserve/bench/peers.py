"""Peer detectors: offline guard models people would put in front of an LLM instead of a decision model, scored as
board rows on the guard tasks and on everyday traffic.

A peer reads each item's state (and each everyday text) and gives a score in [0, 1]; its row is scored exactly
like a model's (the threshold tuned on the task's train side). A second row keeps the peer's own verdict (its
shipped threshold) as a 0/1 score, so the board shows both what the score can do here and what the product does
out of the box.

- `securevector-guardian`: SecureVector Guardian 1.4.0 (package `securevector-guardian-model`, Apache-2.0), word and
  character n-gram TF-IDF with logistic regression over 8 classes (benign and seven threat types), exported to a
  pure-Python runtime; long texts are read in windows. Score: its malicious probability mass
  (`predict_windowed(...)["malicious_score"]`); verdict: `"malicious"` at its shipped threshold. Install:
  `pip install 'jevserve[peers]'`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from jevserve.bench.sources import SourceMissingError

GUARD_TASKS = ("guard-injection", "guard-jailbreak", "guard-harmful", "guard-overrefusal")


@dataclass(frozen=True)
class PeerScores:
    """A peer's score in [0, 1] and its own yes/no verdict per text."""

    scores: np.ndarray
    verdicts: np.ndarray


@dataclass(frozen=True)
class Peer:
    """An offline detector: its row names, the tasks it answers and how it reads texts."""

    name: str  # the score row; the verdict row is f"{name}-verdict"
    tasks: tuple[str, ...]
    read: Callable[[Sequence[str], bool], PeerScores] = field(repr=False)  # (texts, show progress)
    metadata: dict[str, Any] = field(default_factory=dict)  # what the board shows about it


@functools.lru_cache(maxsize=1)
def _guardian() -> Any:
    try:
        from svguardian import resolve_runtime
        from svguardian.model.pure_infer import PureGuardian
    except ImportError:
        raise SourceMissingError(
            "securevector-guardian", "the securevector-guardian row needs the package securevector-guardian-model",
            "pip install 'jevserve[peers]'",
        ) from None
    return PureGuardian.load(resolve_runtime())


def read_guardian(texts: Sequence[str], progress: bool = False) -> PeerScores:
    """SecureVector Guardian's malicious probability and verdict per text (windowed for long texts)."""
    from svguardian.window import predict_windowed

    guardian = _guardian()
    scores, verdicts = [], []
    for text in tqdm(texts, desc="securevector-guardian", unit="text", disable=not progress):
        prediction = predict_windowed(guardian, text)
        scores.append(float(prediction["malicious_score"]))
        verdicts.append(prediction["verdict"] == "malicious")
    return PeerScores(np.asarray(scores, dtype=np.float64), np.asarray(verdicts, dtype=bool))


PEERS = {
    "securevector-guardian": Peer(
        "securevector-guardian", GUARD_TASKS, read_guardian,
        {"parameters": "TF-IDF word and character n-grams, logistic regression over 8 classes (1.8 MB runtime)",
         "runs": "CPU, pure Python, in process", "licence": "Apache-2.0",
         "package": "securevector-guardian-model==1.4.0"},
    ),
}


def _answers(items: Sequence[Any], values: np.ndarray, position: dict[str, int], question: str) -> list[dict]:
    """The peer's values for these items as the wire answers a task reads: a yes/no answer to its question."""
    return [{question: {"type": "noul", "noul": float(values[position[i.state]])}} for i in items]


def score_peer(
    peer: Peer, loaded: Sequence[Any], data: Any, *, command: str, num_resamples: int, progress: bool = False,
) -> list[dict[str, Any]]:
    """The peer's two result documents (score and verdict) over the loaded tasks it answers."""
    from jevserve.bench.evaluate import MODEL, evaluate
    from jevserve.bench.pipeline import result_document
    from jevserve.bench.scoring import score_row

    entries = [e for e in loaded if e.task.name in peer.tasks]
    texts = list(dict.fromkeys(i.state for e in entries
                               for i in (*e.train, *e.test, *(e.everyday.items if e.everyday else ()))))
    if not texts:
        return []
    read = peer.read(texts, progress)
    position = {t: k for k, t in enumerate(texts)}
    documents = []
    for row, values in ((peer.name, read.scores), (f"{peer.name}-verdict", read.verdicts.astype(np.float64))):
        results = {}
        for entry in entries:
            question, everyday = entry.task.primary, entry.everyday
            outcome = evaluate(
                entry.task, entry.train, entry.test, data, _answers(entry.train, values, position, question),
                _answers(entry.test, values, position, question), everyday=everyday,
                everyday_answers=_answers(everyday.items, values, position, question) if everyday else None,
            )
            results[entry.task.name] = {**score_row(outcome, MODEL, num_resamples=num_resamples),
                                        "near_duplicates_dropped": entry.near_duplicates_dropped}
        metadata = {**peer.metadata, "reads": "its malicious probability" if row == peer.name else
                    "its own verdict (shipped threshold) as 0/1"}
        documents.append(result_document(row, command, results, {e.task.name: e.task for e in entries}, (),
                                         num_resamples, row_kind="peer", metadata=metadata, wall_s=None,
                                         num_decisions=len(texts)))
    return documents
