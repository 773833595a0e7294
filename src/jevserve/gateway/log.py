"""The decision log: one JSON line per request (questions, answers, actions, latencies, upstream outcome).

It is the data a later training run learns the system's own behaviour from, and what `jevserve gateway replay`
re-decides. Each record is written and flushed before the response is sent, so nothing is lost on shutdown;
the file rotates by size (`path` → `path.1` → ... → `path.N`, the oldest dropped).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from jevserve.json_report import open_for_append

logger = logging.getLogger(__name__)


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
        self.num_failed = 0  # records a write failed for (a full disk, a read-only folder): lost, said, counted
        self.problem: str | None = None  # why the last write failed; None once one succeeds

    def write(self, record: dict[str, Any]) -> bool:
        """Append one record and flush it to the OS; rotate first when the file is full. A write that fails (a full
        disk) loses this record, not the request: the reply the upstream made still goes to its client (a 500 sent
        after the upstream's work made the client retry it twice), and the failure is logged and counted. Returns
        whether the record was written."""
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            start = None
            try:
                if self._file.tell() + len(line) > self.max_bytes and self._file.tell() > 0:
                    self._rotate()
                start = self._file.tell()
                self._file.write(line)
                self._file.flush()
            except (OSError, ValueError) as exc:  # ValueError: a file a failed rotation left closed
                self._drop_partial(start)
                self.num_failed += 1
                first = self.problem is None
                self.problem = f"writing {self.path} failed: {exc}"
                if first or self.num_failed % 100 == 0:
                    logger.warning("decision log: %s; %d record(s) lost so far, requests are still answered",
                                   self.problem, self.num_failed)
                return False
            if self.problem is not None:
                logger.warning("decision log: writing %s works again after %d lost record(s)", self.path,
                               self.num_failed)
                self.problem = None
            self.num_written += 1
            return True

    def _drop_partial(self, start: int | None) -> None:
        """After a failed write: what of the line reached the buffer or the file is dropped, so that neither a later
        flush writes it under another request's time nor a torn line is left (the file is cut back to `start`)."""
        # closing flushes what is buffered, which fails again on a full disk; the file is closed all the same
        with contextlib.suppress(OSError, ValueError):
            self._file.close()
        with contextlib.suppress(OSError):
            if start is not None and self.path.stat().st_size > start:
                os.truncate(self.path, start)
        # reopened for the next record; where that fails too (the folder went read-only) the file stays closed, and
        # the next write's tell() fails and comes here again
        with contextlib.suppress(OSError):
            self._file = self.path.open("a", encoding="utf-8")

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
                try:
                    self._file.flush()
                    os.fsync(self._file.fileno())
                except OSError as exc:  # a full disk at shutdown: said, and the gateway still stops cleanly
                    logger.warning("decision log: closing %s: %s", self.path, exc)
                with contextlib.suppress(OSError):
                    self._file.close()


def unwritable_problem(path: str | Path) -> str | None:
    """Why a decision log at `path` could not be written, found without writing it (`gateway check` and the start,
    before "listening": a read-only or immutable folder passed the check and failed the start), else None. Its
    folder, or the nearest one above that exists where the gateway would create it, takes a temporary file."""
    target = Path(path).expanduser()
    if target.is_dir():
        return f"{target} is a folder; name a file in it"
    try:
        if target.exists():
            with target.open("a", encoding="utf-8"):
                return None
        folder = next((p for p in target.parents if p.exists()), None)
        if folder is None or not folder.is_dir():
            return f"{folder} is a file, not a folder" if folder is not None else "no folder above it exists"
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return f"cannot write there ({exc.strerror or exc})"


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
