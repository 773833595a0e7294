"""The board's static page in a real headless Chromium at 1,440 px: no table is wider than the page, and the
forest plots load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jevserve.bench.board import Board, Cell, Row
from jevserve.bench.board_html import render_html
from jevserve.bench.board_plots import write_plots
from jevserve.bench.cells import TaskCell
from jevserve.bench.compare import PairedDelta
from jevserve.bench.task import CATEGORIES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "board" / "index.html"
TASKS = tuple(f"{c}-task-number-{k}" for c in CATEGORIES for k in range(3))  # 18 tasks with long names


def _cell(task: str, score: float) -> TaskCell:
    return TaskCell(task, score, score - 9.5, score + 8.25, score * 0.8, -12.3, 55.5, 0.123, -0.05, 0.2, 0.87,
                    task.endswith("0"), 0, np.empty(0))


def _wide_board(num_rows: int = 16) -> Board:
    """Many rows with long names and every section filled: the widest page the board can draw."""
    rows = []
    for k in range(num_rows):
        name = f"a-long-model-name-number-{k:02d}-heldout"
        cells = {t: _cell(t, 10.0 + k) for t in TASKS}
        average = Cell(10.0 + k, 1.0 + k, 19.0 + k)
        everyday = {t: {"n": 1708, "rate": 0.031, "interval": [0.02, 0.04],
                        "at_1pct": {"recall": {"n": 400, "rate": 0.42, "interval": [0.37, 0.47]}}}
                    for t in TASKS if t.startswith(("guard", "agent"))}
        rows.append(Row(model=name, kind="model", date="2026-12-02", command=f"jevserve bench run --model {name} "
                        "--endpoint http://a-very-long-host-name.example.com:8795 --tasks " + ",".join(TASKS),
                        wall_s=1.0, num_decisions=1, average=average, categories={c: average for c in CATEGORIES},
                        tasks={t: average for t in TASKS}, rank={"rank": k + 1, "low": k + 1, "high": k + 3},
                        average_all=average, cells=cells, everyday=everyday,
                        metadata={"parameters": "22M encoder + readout", "runs": "CPU, in process",
                                  "latency": "9.97 ms p50", "licence": "Apache-2.0"},
                        everyday_blocked={"n": 1708, "rate": 0.05, "interval": [0.04, 0.06]}))
    pairs = tuple(PairedDelta(a.model, b.model, 1.5, -3.25, 6.5, 0.66) for a in rows for b in rows if a is not b)
    deltas = {r.model: {t: PairedDelta(r.model, "tfidf-lr", 2.0, -5.0, 9.0, 0.7) for t in TASKS} for r in rows}
    return Board(rows=tuple(rows), tasks=TASKS, task_categories={t: t.split("-")[0] for t in TASKS},
                 ranking_tasks=TASKS, num_resamples=10_000, ignored=(),
                 reference={t: {"metric": "balanced_accuracy", "default": 0.6, "oracle": 1.0, "chance": 0.5,
                                "default_train_share": 0.2, "n_test": 1234} for t in TASKS},
                 headline_tasks=TASKS[1:], near_oracle_tasks=tuple(t for t in TASKS if t.endswith("0")),
                 pairs=pairs, task_deltas=deltas, comparison_row="tfidf-lr", mdd={t: 12.3 for t in TASKS},
                 mdd_rows=(rows[0].model, rows[1].model))


def _check_page(chromium, url: str) -> None:
    context = chromium.new_context(viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.goto(url)
    page_width = page.evaluate("document.documentElement.clientWidth")
    widths = page.evaluate("Array.from(document.querySelectorAll('table')).map(t => [t.id, "
                           "t.getBoundingClientRect().right, t.scrollWidth, t.clientWidth])")
    assert widths, "no table on the page"
    for table_id, right, scroll, client in widths:
        assert right <= page_width + 0.5, f"table #{table_id} ends at {right:.0f} px, past the {page_width} px page"
        assert scroll <= client + 1, f"table #{table_id} overflows its box ({scroll} > {client} px)"
    assert page.evaluate("document.documentElement.scrollWidth") <= page_width + 1
    loaded = page.evaluate("Array.from(document.images).map(i => [i.id, i.complete && i.naturalWidth > 0])")
    assert loaded and all(ok for _, ok in loaded), f"a plot did not load: {loaded}"
    context.close()


def test_the_widest_board_fits_a_1440_px_page_and_its_plots_load(chromium, tmp_path):
    board = _wide_board()
    (tmp_path / "index.html").write_text(render_html(board), encoding="utf-8")
    write_plots(board, tmp_path)
    _check_page(chromium, (tmp_path / "index.html").as_uri())


def test_the_committed_board_fits_a_1440_px_page_and_its_plots_load(chromium):
    if not PAGE.exists():
        pytest.skip(f"{PAGE} is not there; run `jevserve bench board`")
    _check_page(chromium, PAGE.as_uri())


def test_the_width_check_fails_on_a_table_wider_than_the_page(chromium, tmp_path):
    cells = "<td style='white-space:nowrap'>a wide cell of text</td>" * 40
    wide = f"<table id='too-wide'><tr>{cells}</tr></table>"
    (tmp_path / "index.html").write_text(f"<html><body>{wide}</body></html>", encoding="utf-8")
    with pytest.raises(AssertionError, match="too-wide"):
        _check_page(chromium, (tmp_path / "index.html").as_uri())
