"""What the pages read, computed once per change: the board from committed results, the board rows' stored
playground answers, the per-task references for people's scores, and task descriptions.

Everything comes through bench's public functions (board.build_board, results.latest_results, describe), so the
pages show whatever rows the committed results hold. The results are re-read when a results file changes.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jevserve.bench.board import Board, build_board
from jevserve.bench.results import latest_results
from jevserve.web.answering import StoredRow, stored_rows
from jevserve.web.humans import task_references


@dataclass(frozen=True)
class SiteData:
    """The committed results as the pages read them."""

    documents: dict[str, dict[str, Any]]  # model → its newest results document
    stored: tuple[StoredRow, ...]
    refs: dict[str, dict[str, Any]]  # playground task → stored labels, default and oracle actions by item id


def _fingerprint(results_dir: Path) -> tuple[tuple[str, float], ...]:
    return tuple(sorted((str(p), p.stat().st_mtime) for p in Path(results_dir).glob("*/????-??-??.json")))


class SiteCache:
    """Reads the results on first use and again whenever a results file is added or changed; the board (the
    costly part: every row's resamples) is computed only when a page needs it."""

    def __init__(self, results_dir: Path) -> None:
        self.results_dir = Path(results_dir)
        self._lock = threading.Lock()
        self._key: Any = None
        self._data: SiteData | None = None
        self._board: Board | None = None
        self._board_of: SiteData | None = None  # the data the board was computed with
        self._board_lock = threading.Lock()

    def _refresh(self) -> None:
        key = _fingerprint(self.results_dir)
        if self._data is None or key != self._key:
            documents = latest_results(self.results_dir).documents
            self._data = SiteData(
                documents={d["model"]: d for d in documents},
                stored=stored_rows(self.results_dir),
                refs=task_references(documents),
            )
            self._key = key

    def get(self) -> SiteData:
        """The current results documents, stored answers and references."""
        with self._lock:
            self._refresh()
            return self._data

    def board(self) -> Board:
        """The current board (FileNotFoundError when there are no results)."""
        # Its own lock: pages that need only the documents (the playground) do not wait while the board computes.
        with self._board_lock:
            data = self.get()
            if self._board is None or self._board_of is not data:
                self._board = build_board(self.results_dir)
                self._board_of = data
            return self._board


_CODE = re.compile(r"`([^`]*)`")


def inline_markdown(text: str) -> str:
    """HTML for the inline markdown describe.py writes (backtick code only); everything else is escaped."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


@dataclass(frozen=True)
class TaskDescription:
    """A task page's content: describe.py's reference rows and the questions JSON."""

    name: str
    category: str
    rows: tuple[tuple[str, str], ...]  # (label, HTML)
    questions_json: str


def describe_task(name: str, data: Any, baseline: dict[str, Any] | None) -> TaskDescription:
    """The task's reference section, as docs/bench.md shows it (bench.describe.task_markdown), split into rows."""
    from jevserve.bench import TASKS
    from jevserve.bench.describe import task_markdown
    from jevserve.bench.pipeline import load_tasks

    loaded, skipped = load_tasks([TASKS[name]], data, log=lambda _: None)
    if not loaded:
        raise FileNotFoundError(skipped[0].message)
    text = task_markdown(loaded[0], baseline)
    rows = []
    for line in text.splitlines():
        if line.startswith("| ") and line.endswith(" |") and not line.startswith("| |"):
            label, _, value = line[2:-2].partition(" | ")
            rows.append((label, inline_markdown(value)))
    questions = text.split("```json\n", 1)[1].split("\n```", 1)[0] if "```json\n" in text else ""
    return TaskDescription(name, TASKS[name].category, tuple(rows), questions)


def board_models(board: Board) -> Sequence[str]:
    """The row names of the board, in board order."""
    return [r.model for r in board.rows]
