"""The board's static page in a real headless Chromium: intervals are printed under every score, and a bar cut at
the ±100 axis shows its mark."""

from __future__ import annotations

from pathlib import Path

import pytest

from jevserve.bench.board import Board, Cell, Row
from jevserve.bench.board_html import render_html

PAGE = Path(__file__).resolve().parents[2] / "docs" / "board" / "index.html"


def _board_with_a_clipped_cell() -> Board:
    def row(model: str, score: float, low: float, high: float) -> Row:
        cell = Cell(score, low, high)
        return Row(model=model, kind="model", date="2026-11-30", command=f"jevserve bench run --model {model}",
                   wall_s=1.0, num_decisions=1, average=cell, categories={"guard": cell}, tasks={"t": cell},
                   rank={"rank": 1, "low": 1, "high": 1}, average_all=cell)

    return Board(rows=(row("wide", -251.2, -1036.7, -67.3), row("narrow", 12.5, 3.0, 20.0)), tasks=("t",),
                 task_categories={"t": "guard"}, ranking_tasks=("t",), num_resamples=1000, ignored=(),
                 reference={"t": {"metric": "balanced_accuracy", "default": 0.896, "oracle": 1.0}},
                 headline_tasks=("t",))


def test_a_cell_beyond_the_axis_shows_its_clip_mark_and_its_printed_interval(chromium, tmp_path):
    page_path = tmp_path / "index.html"
    page_path.write_text(render_html(_board_with_a_clipped_cell()), encoding="utf-8")
    page = chromium.new_page()
    page.goto(page_path.as_uri())
    wide = page.locator("#rows tr", has_text="wide")
    assert wide.locator(".clip").first.is_visible()
    assert wide.locator("polygon.clip-mark").count() >= 1
    assert "[-1036.7, -67.3]" in wide.locator(".ci").first.inner_text()
    narrow = page.locator("#rows tr", has_text="narrow")
    assert narrow.locator(".clip").count() == 0 and narrow.locator(".ci").first.is_visible()
    page.close()


def test_the_committed_board_prints_every_interval_and_marks_every_clipped_bar(chromium):
    if not PAGE.exists():
        pytest.skip(f"{PAGE} is not there; run `jevserve bench board`")
    page = chromium.new_page()
    page.goto(PAGE.as_uri())
    cells = page.locator("#rows td[data-v] .v")
    assert cells.count() > 0
    intervals = page.locator("#rows td .ci")
    assert intervals.count() == cells.count() and intervals.first.is_visible()
    # Every cell whose interval leaves the ±100 axis carries a visible mark, and no other cell does.
    for cell in page.locator("#rows td[title]").all():
        low, high = (float(x) for x in cell.locator(".ci").inner_text().strip("[]").split(","))
        score = float(cell.get_attribute("data-v"))
        if any(abs(abs(v) - 100) <= 0.05 for v in (low, high, score)):
            continue  # printed to 0.1: too close to the edge to tell from the text
        beyond = min(low, score) < -100 or max(high, score) > 100
        assert (cell.locator(".clip").count() == 1) == beyond, cell.get_attribute("title")
        if beyond:
            assert cell.locator(".clip").is_visible()
    assert page.locator("#probes").count() == 1 and page.locator("#reference").is_visible()
    page.close()
