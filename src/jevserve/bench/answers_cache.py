"""The on-disk answers cache: one JSON line per answered request, appended and flushed as each answer arrives.

A request's key is sha256 of the model name and the canonical request JSON (sorted keys, no spaces), so the same
question about the same state asked of the same model is asked once, whichever task or run asks it. An interrupted
run loses at most the line being written; a torn last line is skipped on reading and closed before the next append.
Any other line that cannot be used (not UTF-8, not JSON, an answer that is not a valid wire answer, a refusal whose
status is not a refusal) is skipped on reading as well, so its request is asked again.

    <dir>/<model>.jsonl     {"key": sha256, "answers": {question id: wire answer}}
                            {"key": sha256, "error": {"status": 413, "message": "..."}}   (the endpoint refused it)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from jevserve.cache_root import cache_root
from jevserve.json_report import open_for_append

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# Statuses that say the endpoint can never answer this one request (bad, too long or invalid for it): such a request
# is cached as refused and read as "no information". Every other status says something about the endpoint (auth,
# URL, overload, a fault) and stops the run instead, since a cached refusal is never asked again.
REFUSAL_STATUSES = frozenset({400, 413, 422})
# How far a choice or score answer's probabilities may sum from 1 (the conformance suite's floor; rounded replies
# get 0.005 per option more).
SUM_TOLERANCE = 0.05


def default_answers_dir() -> Path:
    """$JEVSERVE_CACHE/bench/answers when that variable is set, else ~/.cache/jevserve/bench/answers."""
    return cache_root() / "bench" / "answers"


def safe_name(model: str) -> str:
    """A file-system-safe form of a model name (used for cache files and results folders)."""
    cleaned = _UNSAFE.sub("_", model).strip("._")
    if not cleaned:
        raise ValueError(f"model name {model!r} has no usable characters; use letters, digits, '.', '_' or '-'")
    return cleaned


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal requests give equal strings."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_key(model: str, body: Mapping[str, Any]) -> str:
    """sha256 of (model name, canonical request JSON); the `model` field inside `body` is ignored."""
    request = {k: v for k, v in body.items() if k != "model"}
    return hashlib.sha256(f"{model}\n{canonical_json(request)}".encode()).hexdigest()


def _probability_problem(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or not 0 <= value <= 1:
        return f"{value!r} is not a probability in [0, 1]"
    return None


def answer_problem(answer: Any, question: Mapping[str, Any] | None = None) -> str | None:
    """What makes one wire answer unusable (None: nothing the bench reads is wrong): its type, and its `noul` or
    its `probabilities` (numbers in [0, 1] summing to 1). Given the question, also that it answers that question:
    the same type, and a probability for exactly its options (choice) or levels "0".."n-1" (score)."""
    if not isinstance(answer, Mapping):
        return f"{answer!r} is not an answer object"
    kind = answer.get("type")
    if question is not None and kind != question.get("type"):
        return f"type {kind!r} answers a {question.get('type')!r} question"
    if kind == "noul":
        problem = _probability_problem(answer.get("noul"))
        return None if problem is None else f"noul {problem}"
    if kind not in ("choice", "score"):
        return f"type {kind!r}; expected noul, choice or score"
    probabilities = answer.get("probabilities")
    if not isinstance(probabilities, Mapping) or not probabilities:
        return f"probabilities {probabilities!r}; expected an object of option -> probability"
    for option, value in probabilities.items():
        problem = _probability_problem(value)
        if problem is not None:
            return f"probability of {option!r}: {problem}"
    total = sum(probabilities.values())
    if abs(total - 1.0) > max(SUM_TOLERANCE, 0.005 * len(probabilities)):
        return f"probabilities sum to {total:.4f}, not 1"
    if question is not None:
        criteria = question.get("criteria") or ()
        expected = set(criteria) if kind == "choice" else {str(level) for level in range(len(criteria))}
        if set(probabilities) != expected:
            return f"probabilities for {sorted(probabilities)}; asked {sorted(expected)}"
    return None


def answers_problem(questions: Mapping[str, Mapping[str, Any]], answers: Any) -> str | None:
    """What makes a reply's `answers` unusable for a request's `questions` (None: a valid answer to each)."""
    if not isinstance(answers, Mapping):
        return "no 'answers' object" if answers is None else f"'answers' is a {type(answers).__name__}, not an object"
    for qid, question in questions.items():
        if qid not in answers:
            return f"no answer to question {qid!r}"
        problem = answer_problem(answers[qid], question)
        if problem is not None:
            return f"question {qid!r}: {problem}"
    return None


def _usable(row: Any) -> bool:
    # What a line must hold to be read: a key, and answers that are each valid or a refusal with a refusal status.
    if not isinstance(row, dict) or not isinstance(row.get("key"), str):
        return False
    if "answers" in row:
        answers = row["answers"]
        return isinstance(answers, dict) and all(answer_problem(a) is None for a in answers.values())
    error = row.get("error")
    return isinstance(error, dict) and error.get("status") in REFUSAL_STATUSES


class AnswersCache:
    """Answers of one model, read from its JSONL file on open and appended to as they arrive."""

    def __init__(self, directory: Path, model: str, version: str | None = None) -> None:
        # `version` names what the answers depend on beyond the model's name (the embedded models' weights), so
        # answers of an older version are never mistaken for the current one's.
        self.path = Path(directory) / f"{safe_name(model)}{'@' + safe_name(version) if version else ''}.jsonl"
        self.model = model
        self.version = version
        self.answers: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, dict[str, Any]] = {}
        self.num_torn_lines = 0  # lines skipped on reading: torn by a killed run, or otherwise damaged
        self._file: TextIO | None = None
        self._lock: TextIO | None = None  # taken by `try_lock`, held until `close`
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        with self.path.open("rb") as f:  # bytes: one damaged line must not stop the reading of the others
            for line in f:
                try:
                    row = json.loads(line.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    row = None
                if not _usable(row):
                    self.num_torn_lines += 1  # cut by a killed run, or damaged: its request is simply asked again
                    continue
                if "answers" in row:
                    self.answers[row["key"]] = row["answers"]
                    self.errors.pop(row["key"], None)
                elif "error" in row:
                    self.errors[row["key"]] = row["error"]

    def __contains__(self, key: str) -> bool:
        return key in self.answers or key in self.errors

    def answered(self, key: str, questions: Mapping[str, Mapping[str, Any]]) -> bool:
        """Whether the key needs no asking: it was refused, or its answers answer every one of `questions` (an
        older run may have cached a reply that lacks some, or answers other options)."""
        if key in self.answers:
            return answers_problem(questions, self.answers[key]) is None
        return key in self.errors

    def get(self, key: str) -> dict[str, Any] | None:
        """The answers for a key, or None when the key failed or was never asked."""
        return self.answers.get(key)

    def open(self) -> None:
        """Open the file for appending now (an OSError when it cannot be written): checked before any asking, so a
        file that cannot take answers is said at once, not after the data has loaded and the first answer came."""
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open_for_append(self.path)  # a torn last line closed first

    def try_lock(self) -> bool:
        """Take the file for this run until `close`, unless another run holds it (False): two runs asking the same
        model into the same cache each sent every request; the second should wait (polling this) and `reread`."""
        if self._lock is None:
            lock_path = self.path.with_name(self.path.name + ".lock")
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            self._lock = lock_path.open("a")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def reread(self) -> None:
        """Read the file again: what another run appended while this one waited."""
        self.answers.clear()
        self.errors.clear()
        self.num_torn_lines = 0
        if self.path.exists():
            self._read()

    def _append(self, row: dict[str, Any]) -> None:
        self.open()
        assert self._file is not None
        self._file.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()  # per answer: a killed process keeps every answer it received

    def record(self, key: str, answers: Mapping[str, Any]) -> None:
        """Store and append one request's answers."""
        self.answers[key] = dict(answers)
        self.errors.pop(key, None)
        self._append({"key": key, "answers": self.answers[key]})

    def record_error(self, key: str, status: int, message: str) -> None:
        """Store and append a request the endpoint refused (a status of REFUSAL_STATUSES); it is not asked again."""
        self.errors[key] = {"status": status, "message": message}
        self._append({"key": key, "error": self.errors[key]})

    def close(self) -> None:
        """Close the file (answers already written stay) and let go of the lock."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._lock is not None:
            self._lock.close()  # closing the descriptor releases the flock
            self._lock = None
