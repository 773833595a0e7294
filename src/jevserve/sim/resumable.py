"""Resumable parallel runs: every finished cell is appended to a JSONL file at once, so a killed sweep loses
only the cells in flight and a rerun computes just the missing ones. Used by every sweep of the simulator.

Ctrl-C reaches the whole process group; the workers ignore it, so only the parent stops (an `Interrupted` saying
where the finished cells are) and ends the pool, instead of every worker printing a KeyboardInterrupt traceback."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from jevserve.json_report import jsonl_lines, open_for_append

_WORKER: tuple[Callable[[Any, Any], dict], Any] | None = None  # (worker, context), set by _init_worker


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during `run_keyed`; the message says where the finished cells are kept."""


def _init_worker(worker: Callable[[Any, Any], dict], context: Any) -> None:
    global _WORKER
    _WORKER = (worker, context)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates the pool


def _call(cell: Any) -> dict:
    assert _WORKER is not None, "_call runs in a pool whose initializer set the worker"
    worker, context = _WORKER
    return worker(cell, context)


def read_rows(path: Path) -> dict[str, dict]:
    """Finished cells of a results file by key (a torn last line from a killed run is skipped)."""
    done: dict[str, dict] = {}
    if path.exists():
        for line in jsonl_lines(path.read_text()):
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[row["key"]] = row
    return done


def count_reused(cells: Iterable[Any], results_path: Path) -> int:
    """How many of `cells` a run over `results_path` reads back instead of computing: where a resumed sweep's
    progress starts (a bar at 0 read as if nothing was kept)."""
    done = read_rows(results_path)
    return sum(1 for cell in cells if cell.key in done)


def run_keyed(
    cells: Iterable[Any],
    worker: Callable[[Any, Any], dict],
    context: Any,
    *,
    results_path: Path | None = None,
    jobs: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Run `worker(cell, context)` for every cell (anything with a `.key`) not already in `results_path`, in
    `jobs` processes, appending each row (which carries the key) as it finishes; returns the rows in cell order.
    `on_done` sees each row computed here (`count_reused` counts the others)."""
    cells = list(cells)
    done = read_rows(results_path) if results_path is not None else {}
    todo = [c for c in cells if c.key not in done]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    pool = None
    sink = open_for_append(results_path) if results_path is not None else None
    try:
        if jobs == 1:
            results: Iterable[dict] = (worker(c, context) for c in todo)
        else:
            # forkserver, not fork: a forked child inherits every lock the parent's other threads held at that
            # moment (torch's pools, a test runner's I/O threads) and can wait on one forever. The worker and its
            # context therefore travel pickled: both must be importable, module-level objects.
            pool = multiprocessing.get_context("forkserver").Pool(jobs, initializer=_init_worker,
                                                                  initargs=(worker, context))
            results = pool.imap_unordered(_call, todo)
        for row in results:
            done[row["key"]] = row
            if sink is not None:
                sink.write(json.dumps(row) + "\n")
                sink.flush()  # a finished cell is on disk before the next one is taken
            if on_done is not None:
                on_done(row)
    except KeyboardInterrupt:
        if results_path is None:
            raise
        raise Interrupted(f"finished runs are kept in {results_path}; run the same command again to resume "
                          "from them") from None
    finally:
        if pool is not None:
            pool.terminate()
        if sink is not None:
            sink.close()
    return [done[c.key] for c in cells]
