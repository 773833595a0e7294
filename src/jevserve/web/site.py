"""What the pages read, computed once per change: the board from committed results, the board rows' stored
playground answers, the per-task references for people's scores, and task descriptions.

Everything comes through bench's public functions (board snapshots, results.latest_results, describe.task_rows),
so the pages show whatever rows the committed results hold. The results are re-read when a results file changes.
"""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jevserve.bench.board import Board
from jevserve.bench.board_snapshot import cached_board, read_snapshot
from jevserve.bench.results import latest_results
from jevserve.cache_root import cache_root
from jevserve.web.answering import StoredRow, stored_rows
from jevserve.web.humans import task_references


@dataclass(frozen=True)
class SiteData:
    """The committed results as the pages read them."""

    documents: dict[str, dict[str, Any]]  # model → its newest results document
    stored: tuple[StoredRow, ...]
    refs: dict[str, dict[str, Any]]  # playground task → stored labels, default and oracle actions by item id


PACKAGED_BOARD = Path(__file__).parent / "data" / "board.json"  # the committed board, shipped with the package


def default_board_cache() -> Path:
    """Where computed board snapshots are kept between starts ($JEVSERVE_CACHE/web or ~/.cache/jevserve/web)."""
    return cache_root() / "web"


def _fingerprint(results_dir: Path | None) -> tuple[tuple[str, float], ...]:
    if results_dir is None:
        return ()
    return tuple(sorted((str(p), p.stat().st_mtime) for p in Path(results_dir).glob("*/????-??-??.json")))


class SiteCache:
    """Reads the results on first use and again whenever a results file is added or changed. The board (every row
    resampled: minutes) comes from a snapshot computed from exactly these results (docs/board/board.json next to
    the results folder, or the cache folder) when there is one, else it is computed once and cached on disk.

    Without a results folder (`results_dir=None`, e.g. an installed package outside a checkout), the board is the
    snapshot packaged with jevserve and the pages that need the results files say so. A given `snapshot` (the
    board.json of `jevserve bench board --out DIR`) is read first, and stands in for the packaged one.
    """

    def __init__(self, results_dir: Path | None, cache_dir: Path | None = None,
                 packaged: Path = PACKAGED_BOARD, *, snapshot: Path | None = None) -> None:
        self.results_dir = Path(results_dir) if results_dir is not None else None
        self.cache_dir = cache_dir
        self.packaged = snapshot or packaged
        self.snapshots = [snapshot] if snapshot is not None else []
        self._lock = threading.Lock()
        self._key: Any = None
        self._data: SiteData | None = None
        self._board: Board | None = None
        self._board_of: SiteData | None = None  # the data the board was computed with
        self._board_lock = threading.Lock()

    def _refresh(self) -> None:
        key = _fingerprint(self.results_dir)
        if self._data is None or key != self._key:
            documents = latest_results(self.results_dir).documents if self.results_dir is not None else ()
            self._data = SiteData(
                documents={d["model"]: d for d in documents},
                stored=stored_rows(self.results_dir) if self.results_dir is not None else (),
                refs=task_references(documents),
            )
            self._key = key

    def get(self) -> SiteData:
        """The current results documents, stored answers and references (empty without a results folder)."""
        with self._lock:
            self._refresh()
            return self._data

    def board(self) -> Board:
        """The current board (FileNotFoundError when there are no results and no packaged board)."""
        # Its own lock: pages that need only the documents (the playground) do not wait while the board computes.
        with self._board_lock:
            data = self.get()
            if self._board is None or self._board_of is not data:
                self._board = self._load_board()
                self._board_of = data
            return self._board

    def _load_board(self) -> Board:
        if self.results_dir is None:
            board = read_snapshot(self.packaged)
            if board is None:
                raise FileNotFoundError(f"no results folder and no board snapshot at {self.packaged}")
            return board
        beside = self.results_dir.resolve().parent / "docs" / "board" / "board.json"
        return cached_board(self.results_dir, [*self.snapshots, beside], self.cache_dir)


_CODE = re.compile(r"`([^`]*)`")


def inline_markdown(text: str) -> str:
    """HTML for the inline markdown describe.py writes (backtick code only); everything else is escaped."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


@dataclass(frozen=True)
class TaskDescription:
    """A task page's content: describe.py's reference rows and the questions JSON."""

    name: str
    category: str
    rows: tuple[tuple[str, str], ...] | None  # (label, HTML); None while they are still being read from the data
    questions_json: str


def describe_task(name: str, data: Any, baseline: dict[str, Any] | None) -> TaskDescription:
    """The task's reference rows as docs/bench.md shows them (bench.describe.task_rows), and its questions."""
    from jevserve.bench import TASKS
    from jevserve.bench.describe import task_rows
    from jevserve.bench.pipeline import load_tasks

    loaded, skipped = load_tasks([TASKS[name]], data, log=lambda _: None, everyday=False)
    if not loaded:
        raise FileNotFoundError(skipped[0].message)
    rows = tuple((label, inline_markdown(value)) for label, value in task_rows(loaded[0], baseline))
    return TaskDescription(name, TASKS[name].category, rows, task_questions_json(name))


def task_questions_json(name: str) -> str:
    """The task's questions as JSON (known without its data)."""
    from jevserve.bench import TASKS

    return json.dumps(dict(TASKS[name].questions), indent=2, ensure_ascii=False)


def board_models(board: Board) -> Sequence[str]:
    """The row names of the board, in board order."""
    return [r.model for r in board.rows]
