"""The on-disk answers cache: one JSON line per answered request, appended and flushed as each answer arrives.

A request's key is sha256 of the model name and the canonical request JSON (sorted keys, no spaces), so the same
question about the same state asked of the same model is asked once, whichever task or run asks it. An interrupted
run loses at most the line being written; a torn last line is skipped on reading and closed before the next append.

    <dir>/<model>.jsonl     {"key": sha256, "answers": {question id: wire answer}}
                            {"key": sha256, "error": {"status": 413, "message": "..."}}   (the endpoint refused it)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_answers_dir() -> Path:
    """$JEVSERVE_CACHE/bench/answers when that variable is set, else ~/.cache/jevserve/bench/answers."""
    root = os.environ.get("JEVSERVE_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "jevserve") / "bench" / "answers"


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


class AnswersCache:
    """Answers of one model, read from its JSONL file on open and appended to as they arrive."""

    def __init__(self, directory: Path, model: str, version: str | None = None) -> None:
        # `version` names what the answers depend on beyond the model's name (the embedded models' weights), so
        # answers of an older version are never mistaken for the current one's.
        self.path = Path(directory) / f"{safe_name(model)}{'@' + safe_name(version) if version else ''}.jsonl"
        self.model = model
        self.answers: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, dict[str, Any]] = {}
        self.num_torn_lines = 0
        self._file: TextIO | None = None
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        with self.path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    self.num_torn_lines += 1  # a line cut by a killed run; its request is simply asked again
                    continue
                if "answers" in row:
                    self.answers[row["key"]] = row["answers"]
                    self.errors.pop(row["key"], None)
                elif "error" in row:
                    self.errors[row["key"]] = row["error"]

    def __contains__(self, key: str) -> bool:
        return key in self.answers or key in self.errors

    def get(self, key: str) -> dict[str, Any] | None:
        """The answers for a key, or None when the key failed or was never asked."""
        return self.answers.get(key)

    def _append(self, row: dict[str, Any]) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Close a torn last line first, so the next record starts on a line of its own.
            if self.path.exists() and self.path.stat().st_size > 0:
                with self.path.open("rb") as f:
                    f.seek(-1, os.SEEK_END)
                    torn = f.read(1) != b"\n"
                if torn:
                    with self.path.open("a", encoding="utf-8") as f:
                        f.write("\n")
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()  # per answer: a killed process keeps every answer it received

    def record(self, key: str, answers: Mapping[str, Any]) -> None:
        """Store and append one request's answers."""
        self.answers[key] = dict(answers)
        self.errors.pop(key, None)
        self._append({"key": key, "answers": self.answers[key]})

    def record_error(self, key: str, status: int, message: str) -> None:
        """Store and append a request the endpoint refused (a 4xx); it is not asked again."""
        self.errors[key] = {"status": status, "message": message}
        self._append({"key": key, "error": self.errors[key]})

    def close(self) -> None:
        """Close the file (answers already written stay)."""
        if self._file is not None:
            self._file.close()
            self._file = None
