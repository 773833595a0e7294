"""The board as a typed JSON snapshot, keyed by the results it was computed from, so pages load it in a moment.

Computing the board resamples every row 10,000 times (minutes on two cores); a snapshot keeps everything a page
shows (cells, averages, ranks, paired differences, MDDs, everyday rates, metadata) without the per-draw arrays.
`results_key` is the sha256 of every results file's name and bytes, so a snapshot is used only for exactly the
results it came from. `jevserve bench board` writes one next to the HTML page (docs/board/board.json); `jevserve
web` reads that, or its own cache, or computes and caches one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.board import Board, Cell, Row, build_board
from jevserve.bench.cells import TaskCell
from jevserve.bench.compare import PairedDelta

KIND = "jevserve-bench-board"
VERSION = 1
_EMPTY = np.empty(0)


def results_key(results_dir: Path) -> str:
    """sha256 over every results file (`<row>/<date>.json`): its path under `results_dir` and its bytes."""
    digest = hashlib.sha256()
    for path in sorted(Path(results_dir).glob("*/????-??-??.json")):
        digest.update(str(path.relative_to(results_dir)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _cell_json(cell: TaskCell) -> dict[str, Any]:
    return {f.name: getattr(cell, f.name) for f in dataclasses.fields(cell) if f.name != "draws"}


def _cell_from(data: dict[str, Any]) -> TaskCell:
    numbers = {k: (_number(v) if k not in ("task", "near_oracle", "nan_draws") else v) for k, v in data.items()}
    return TaskCell(**numbers, draws=_EMPTY)


def _plain_cell(cell: Cell) -> list[Any]:
    return [cell.score, cell.low, cell.high]


def to_json(board: Board, key: str) -> dict[str, Any]:
    """The snapshot of a board computed from results with `key`."""
    rows = []
    for row in board.rows:
        rows.append({
            **{f: getattr(row, f) for f in ("model", "kind", "date", "command", "wall_s", "num_decisions", "rank",
                                            "notes", "split_salt", "metadata", "everyday", "everyday_blocked")},
            "average": _plain_cell(row.average),
            "average_all": _plain_cell(row.average_all) if row.average_all else None,
            "categories": {c: _plain_cell(v) for c, v in row.categories.items()},
            "cells": {t: _cell_json(c) for t, c in row.cells.items()},
        })
    return _plain({
        "kind": KIND, "version": VERSION, "results_key": key, "rows": rows,
        **{f: getattr(board, f) for f in ("tasks", "task_categories", "ranking_tasks", "num_resamples", "ignored",
                                          "warnings", "reference", "headline_tasks", "near_oracle_tasks",
                                          "comparison_row", "mdd", "mdd_rows")},
        "pairs": [dataclasses.asdict(p) for p in board.pairs],
        "task_deltas": {r: {t: dataclasses.asdict(d) for t, d in per.items()} for r, per in board.task_deltas.items()},
    })


def _delta(data: dict[str, Any]) -> PairedDelta:
    return PairedDelta(data["a"], data["b"], *(_number(data[k]) for k in ("delta", "low", "high", "p_greater")))


def from_json(data: dict[str, Any]) -> Board:
    """The board a snapshot holds (cells without their per-draw arrays)."""
    if data.get("kind") != KIND or data.get("version") != VERSION:
        raise ValueError(f"not a board snapshot of version {VERSION} (kind {data.get('kind')!r})")
    rows = []
    for r in data["rows"]:
        cells = {t: _cell_from(c) for t, c in r["cells"].items()}
        rows.append(Row(
            model=r["model"], kind=r["kind"], date=r["date"], command=r["command"], wall_s=r["wall_s"],
            num_decisions=r["num_decisions"], average=Cell(*map(_number, r["average"])),
            categories={c: Cell(*map(_number, v)) for c, v in r["categories"].items()},
            tasks={t: Cell(c.score, c.low, c.high) for t, c in cells.items()}, rank=r["rank"],
            notes=tuple(r["notes"]), average_all=Cell(*map(_number, r["average_all"])) if r["average_all"] else None,
            split_salt=r["split_salt"], cells=cells, metadata=r["metadata"] or {}, everyday=r["everyday"] or {},
            everyday_blocked=r["everyday_blocked"],
        ))
    return Board(
        rows=tuple(rows), tasks=tuple(data["tasks"]), task_categories=data["task_categories"],
        ranking_tasks=tuple(data["ranking_tasks"]), num_resamples=data["num_resamples"],
        ignored=tuple(data["ignored"]), warnings=tuple(data["warnings"]), reference=data["reference"],
        headline_tasks=tuple(data["headline_tasks"]), near_oracle_tasks=tuple(data["near_oracle_tasks"]),
        pairs=tuple(_delta(p) for p in data["pairs"]),
        task_deltas={r: {t: _delta(d) for t, d in per.items()} for r, per in data["task_deltas"].items()},
        comparison_row=data["comparison_row"], mdd={k: _number(v) for k, v in data["mdd"].items()},
        mdd_rows=tuple(data["mdd_rows"]),
    )


def read_snapshot(path: Path, key: str | None = None) -> Board | None:
    """The board in `path` when it exists, reads, and (with `key`) was computed from those results; else None."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if key is not None and data.get("results_key") != key:
            return None
        return from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_snapshot(board: Board, key: str, path: Path) -> Path:
    """Write the snapshot (atomically: a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(to_json(board, key), ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def cached_board(results_dir: Path, candidates: Sequence[Path], cache_dir: Path | None) -> Board:
    """The board of `results_dir`: from the first snapshot among `candidates` (then the cache) computed from exactly
    these results, else computed now and written to `cache_dir/board-<key>.json`."""
    key = results_key(results_dir)
    cache_path = cache_dir / f"board-{key[:20]}.json" if cache_dir is not None else None
    for path in [*candidates, *([cache_path] if cache_path else [])]:
        board = read_snapshot(path, key)
        if board is not None:
            return board
    board = build_board(results_dir)
    if cache_path is not None:
        # A read-only cache folder only costs the next start the same computation.
        with contextlib.suppress(OSError):
            write_snapshot(board, key, cache_path)
    return board
