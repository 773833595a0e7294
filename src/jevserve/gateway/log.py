"""The decision log: one JSON line per request (questions, answers, actions, latencies, upstream outcome).

It is the data a later training run learns the system's own behaviour from, and what `jevserve gateway replay`
re-decides. Each record is written and flushed before the response is sent, so nothing is lost on shutdown;
the file rotates by size (`path` → `path.1` → ... → `path.N`, the oldest dropped).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from jevserve.json_report import open_for_append


class DecisionLog:
    """Append-only JSONL with size-based rotation; safe to call from several threads."""

    def __init__(self, path: str | Path, *, max_bytes: int = 50_000_000, backups: int = 5) -> None:
        self.path = Path(path).expanduser()  # "~/logs/gw.jsonl" is the user's folder, not a folder named "~"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self._file = open_for_append(self.path)  # a gateway killed mid-write left a torn line: closed first
        self.num_written = 0

    def write(self, record: dict[str, Any]) -> None:
        """Append one record and flush it to the OS; rotate first when the file is full."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            if self._file.tell() + len(line) > self.max_bytes and self._file.tell() > 0:
                self._rotate()
            self._file.write(line)
            self._file.flush()
            self.num_written += 1

    def _rotate(self) -> None:
        self._file.close()
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
        else:
            for i in range(self.backups - 1, 0, -1):
                older = self.path.with_name(f"{self.path.name}.{i}")
                if older.exists():
                    os.replace(older, self.path.with_name(f"{self.path.name}.{i + 1}"))
            os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))
        self._file = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        """Flush to disk and close."""
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()


def read_log(path: str | Path) -> list[dict[str, Any]]:
    """Every record of a log file (a truncated last line, from a crash mid-write, is skipped)."""
    records = []
    with Path(path).open(encoding="utf-8") as handle:
        for line in handle:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records
