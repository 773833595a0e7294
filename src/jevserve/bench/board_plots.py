"""Forest plots of the board (matplotlib, PNG and SVG): every row's headline average with its 95% interval, and each
task's paired difference of every model row from the comparison row (tfidf-lr), all from the board's shared draws."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a server or in CI
import matplotlib.pyplot as plt

from jevserve.bench.board import Board

HEADLINE = "headline"
DELTAS = "task-deltas"
COLOURS = {"model": "#0969da", "baseline": "#57606a", "peer": "#8250df", "probe": "#9a6700"}


def _save(figure: plt.Figure, out_dir: Path, stem: str) -> list[Path]:
    paths = [out_dir / f"{stem}.png", out_dir / f"{stem}.svg"]
    figure.savefig(paths[0], dpi=110, bbox_inches="tight")
    # A fixed hash salt (the ids of the SVG's elements are hashes salted at random otherwise) and no date keep the
    # SVG the same for the same board, so rebuilding an unchanged board leaves a checkout unchanged.
    with plt.rc_context({"svg.hashsalt": "jevserve-board"}):
        figure.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    return paths


def headline_forest(board: Board, out_dir: Path) -> list[Path]:
    """Every row with a headline average: point and 95% interval, best first; writes headline.png/.svg."""
    rows = [r for r in board.rows if math.isfinite(r.average.score) and not r.probe]
    height = 0.9 + 0.32 * max(len(rows), 1)
    figure, axis = plt.subplots(figsize=(7.5, height))
    for y, row in enumerate(reversed(rows)):
        colour = COLOURS.get(row.kind, "#0969da")
        axis.plot([row.average.low, row.average.high], [y, y], color=colour, linewidth=2.2, solid_capstyle="butt")
        axis.plot(row.average.score, y, "o", color=colour, markersize=5)
        axis.annotate(f"{row.average.score:.1f} [{row.average.low:.1f}, {row.average.high:.1f}]",
                      (row.average.high, y), xytext=(6, 0), textcoords="offset points", va="center", fontsize=8)
    axis.set_yticks(range(len(rows)), [r.model for r in reversed(rows)], fontsize=9)
    axis.axvline(0, color="#999", linewidth=1)
    axis.set_xlabel(f"headline average over {len(board.headline_tasks)} tasks (0 = default rules; 95% interval, "
                    f"{board.num_resamples:,} paired draws)", fontsize=8)
    axis.margins(x=0.25)
    axis.spines[["top", "right"]].set_visible(False)
    return _save(figure, out_dir, HEADLINE)


def task_delta_forest(board: Board, out_dir: Path) -> list[Path]:
    """One panel per task: each model row's paired difference from the comparison row; writes task-deltas.*."""
    rows = [r for r in board.rows if r.model in board.task_deltas]
    tasks = [t for t in board.tasks if any(t in board.task_deltas[r.model] for r in rows)]
    if not rows or not tasks:
        figure, axis = plt.subplots(figsize=(4, 1))
        axis.text(0.5, 0.5, "no paired differences to draw", ha="center", va="center")
        axis.set_axis_off()
        return _save(figure, out_dir, DELTAS)
    columns = 4
    lines = math.ceil(len(tasks) / columns)
    figure, axes = plt.subplots(lines, columns, figsize=(12, 0.6 + lines * (0.35 + 0.22 * len(rows))),
                                sharey=True, squeeze=False)
    names = [r.model for r in reversed(rows)]
    for k, axis in enumerate(axes.flat):
        if k >= len(tasks):
            axis.set_axis_off()
            continue
        task = tasks[k]
        for y, name in enumerate(names):
            delta = board.task_deltas[name].get(task)
            if delta is None or not math.isfinite(delta.delta):
                continue
            colour = "#1a7f37" if delta.low > 0 else "#cf222e" if delta.high < 0 else "#57606a"
            axis.plot([delta.low, delta.high], [y, y], color=colour, linewidth=2)
            axis.plot(delta.delta, y, "o", color=colour, markersize=3.5)
        axis.axvline(0, color="#999", linewidth=0.8)
        axis.set_title(task + (" (near-oracle)" if task in board.near_oracle_tasks else ""), fontsize=8.5)
        axis.tick_params(labelsize=7)
        axis.set_yticks(range(len(names)), names, fontsize=7.5)
    figure.suptitle(f"Paired difference from {board.comparison_row} per task (score points; 95% interval; green: "
                    "ahead on the interval, red: behind)", fontsize=9)
    figure.tight_layout()
    return _save(figure, out_dir, DELTAS)


def plot_png(board: Board, name: str) -> bytes:
    """One plot ("headline" or "task-deltas") as PNG bytes, for pages that serve it."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        draw = headline_forest if name == HEADLINE else task_delta_forest
        draw(board, Path(folder))
        return (Path(folder) / f"{name}.png").read_bytes()


def write_plots(board: Board, out_dir: Path) -> list[Path]:
    """Both forest plots, PNG and SVG, into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return headline_forest(board, out_dir) + task_delta_forest(board, out_dir)
