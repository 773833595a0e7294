"""The board as markdown (docs/board.md), and the small number formats the HTML page shares."""

from __future__ import annotations

import math
import re
from typing import Any

from jevserve.bench.board import Board, Cell, Row
from jevserve.bench.task import CATEGORIES


def fmt(value: Any, digits: int = 1) -> str:
    """A number, or a dash when there is none."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    return f"{number:.{digits}f}" if math.isfinite(number) else "–"


def pct(value: Any) -> str:
    """A share as a percentage with one decimal (a dash when undefined)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    return f"{100 * number:.1f}%" if math.isfinite(number) else "–"


def cell_text(cell: Cell | None) -> str:
    """`score [low, high]`, or a dash."""
    if cell is None or not math.isfinite(cell.score):
        return "–"
    if math.isfinite(cell.low):
        return f"{cell.score:.1f} [{cell.low:.1f}, {cell.high:.1f}]"
    return f"{cell.score:.1f}"


def rank_text(row: Row) -> str:
    """The row's rank (rows ahead on the paired Δ) and, when it differs, its range over draws."""
    if row.rank is None:
        return "–"
    r = row.rank
    return f"{r['rank']}" if r["low"] == r["high"] == r["rank"] else f"{r['rank']} ({r['low']}–{r['high']})"


def _rate(rate: dict[str, Any] | None) -> str:
    if not rate or not rate.get("n"):
        return "–"
    return f"{pct(rate['rate'])} [{pct(rate['interval'][0])}, {pct(rate['interval'][1])}]"


def _category_text(board: Board, row: Row, category: str) -> str:
    """A row's category average, marked when it averages fewer of the category's tasks than a full row does."""
    text = cell_text(row.categories.get(category))
    covered, of = board.coverage(row.tasks, category)
    return f"{text} ({covered} of {of} tasks)" if text != "–" and covered < of else text


def render_markdown(board: Board, html: str = "docs/board/index.html") -> str:
    """Headline, categories, near-oracle tasks, everyday rates, paired differences, references and commands."""
    ranked = [r for r in board.rows if not r.probe and math.isfinite(r.average.score)]
    others = [r for r in board.rows if not r.probe and r not in ranked]
    cats = [c for c in CATEGORIES if any(board.task_categories.get(t) == c for t in board.tasks)]
    lines = [
        "# JevServe-Bench leaderboard",
        "",
        "Score = 100 × (m − m_default) / (m_oracle − m_chance): 0 = the default rule (or chance), denominator fixed "
        f"on the whole test side, numerator paired on each of {board.num_resamples:,} draws; every cell, average, "
        "rank and Δ comes from the same draws (95% intervals in brackets). Rank: 1 + the rows ahead of it (their "
        "paired Δ's interval wholly above 0), range over draws in brackets. Everyday blocked: share of ordinary user "
        f"requests any of the row's guard decisions acts on. The HTML board ({html}) has forest plots, "
        "the per-category tables and every pairwise Δ; docs/bench.md describes the method.",
        "",
        "| rank | row | headline | all tasks | " + " | ".join(cats) + " | everyday blocked |",
        "|---|---|---|---|" + "---|" * len(cats) + "---|",
    ]
    for row in [*ranked, *others]:
        lines.append(f"| {rank_text(row)} | {row.model} | {cell_text(row.average)} | {cell_text(row.average_all)} | "
                     + " | ".join(_category_text(board, row, c) for c in cats)
                     + f" | {_rate(row.everyday_blocked)} |")
    shown = [*ranked, *others]
    lines += ["", "## Per task", "", "| task | " + " | ".join(r.model for r in shown) + " |",
              "|---|" + "---|" * len(shown)]
    for task in board.tasks:
        label = f"{task} (near-oracle: Δ metric)" if task in board.near_oracle_tasks else task
        cells = []
        for row in shown:
            c = row.cells.get(task)
            if c is None:
                cells.append("–")
            elif task in board.near_oracle_tasks:
                cells.append(f"{c.difference:+.3f} [{c.difference_low:+.3f}, {c.difference_high:+.3f}], "
                             f"P(beats rule) {c.p_beats_rule:.2f}")
            else:
                cells.append(cell_text(c))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    everyday_tasks = [t for t in board.tasks if any(t in r.everyday for r in shown)]
    if everyday_tasks:
        lines += ["", "## Everyday false actions (at the task's threshold; recall at 1% in brackets after)", "",
                  "| row | " + " | ".join(everyday_tasks) + " |", "|---|" + "---|" * len(everyday_tasks)]
        for row in (r for r in shown if r.everyday):
            cells = []
            for task in everyday_tasks:
                e = row.everyday.get(task)
                recall = (e or {}).get("at_1pct", {}).get("recall")
                cells.append("–" if not e else f"{pct(e['rate'])}" + (f"; recall@1% {pct(recall['rate'])}"
                                                                       if recall else ""))
            lines.append(f"| {row.model} | " + " | ".join(cells) + " |")
    if board.pairs:
        lines += ["", "## Paired headline differences", "", "| a − b | Δ [95%] | P(Δ > 0) |", "|---|---|---|"]
        lines += [f"| {p.a} − {p.b} | {p.delta:+.1f} [{p.low:+.1f}, {p.high:+.1f}] | {p.p_greater:.2f} |"
                  for p in board.pairs]
    if board.partial_deltas:
        lines += ["", f"## Rows on some headline tasks, against {board.comparison_row} on the same tasks", "",
                  "| row | tasks | Δ [95%] | P(Δ > 0) | per task Δ [95%] |", "|---|---|---|---|---|"]
        for model, (covered, d) in board.partial_deltas.items():
            per_task = "; ".join(f"{n} {t.delta:+.1f} [{t.low:+.1f}, {t.high:+.1f}]" for n in covered
                                 if (t := board.task_deltas.get(model, {}).get(n)) is not None)
            lines.append(f"| {model} | {len(covered)} of {len(board.headline_tasks)} | {d.delta:+.1f} "
                         f"[{d.low:+.1f}, {d.high:+.1f}] | {d.p_greater:.2f} | {per_task} |")
    mdd_of = " vs ".join(board.mdd_rows) or "the top two rows"
    lines += ["", f"## Tasks (MDD: 80% power, {mdd_of})", "",
              "| task | test items | metric | chance | default | oracle | default's share on train | MDD |",
              "|---|---|---|---|---|---|---|---|"]
    for task in board.tasks:
        ref = board.reference.get(task, {})
        lines.append(f"| {task} | {ref.get('n_test') or '–'} | {ref.get('metric', '–')} | "
                     + " | ".join(fmt(ref.get(k), 3) for k in ("chance", "default", "oracle", "default_train_share"))
                     + f" | {fmt(board.mdd.get(task))} |")
    probes = [r for r in board.rows if r.probe]
    if probes:
        lines += ["", "## Leak probes (not ranked)", "", "| row | " + " | ".join(cats) + " |",
                  "|---|" + "---|" * len(cats)]
        lines += [f"| {r.model} | " + " | ".join(_category_text(board, r, c) for c in cats) + " |" for r in probes]
    lines += ["", "## Reproduce", ""]
    for r in board.rows:
        notes = f" ({'; '.join(r.notes)})" if r.notes else ""
        if "\n" in r.command or "\t" in r.command:  # a code span would turn them into spaces: a block keeps them
            fence = "`" * max(3, _longest_backticks(r.command) + 1)
            lines += [f"- {r.model}{notes}:", "", f"  {fence}", *(f"  {line}" for line in r.command.split("\n")),
                      f"  {fence}", ""]
        else:
            lines.append(f"- {r.model}: {_code_span(r.command)}{notes}")
    lines += [f"- note: {w}" for w in board.warnings]
    return "\n".join(lines) + "\n"


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def _code_span(text: str) -> str:
    """`text` as a markdown code span that reads back as it is: fenced by more backticks than any run in it, and
    spaced inside where it starts or ends with one (CommonMark strips one space from each end)."""
    fence = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or (text.startswith(" ") and text.endswith(" ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


GLANCE_BEGIN = "<!-- generated by `jevserve bench board --into docs/bench.md`: glance begin -->"
GLANCE_END = "<!-- generated glance: end -->"
TASKS_BEGIN = "<!-- generated by `jevserve bench board --into docs/bench.md`: tasks begin -->"
TASKS_END = "<!-- generated tasks: end -->"


def glance_markdown(board: Board) -> str:
    """The rows' headline, everyday cost and rank, for docs/bench.md's "Results at a glance"."""
    guard = [t for t in board.tasks if board.task_categories.get(t) == "guard"]
    lines = [f"From `jevserve bench board` over the committed results ({board.num_resamples:,} paired draws):", "",
             "| rank | row | headline average [95%] | everyday requests blocked by its guard decisions | "
             "mean recall at 1% everyday false actions (guard tasks) |", "|---|---|---|---|---|"]
    for row in board.rows:
        if row.probe or not (math.isfinite(row.average.score) or row.everyday_blocked):
            continue
        recalls = [row.everyday[t]["at_1pct"]["recall"]["rate"] for t in guard
                   if t in row.everyday and "at_1pct" in row.everyday[t]]
        recall = pct(sum(recalls) / len(recalls)) if recalls else "–"
        lines.append(f"| {rank_text(row)} | {row.model} | {cell_text(row.average)} | {_rate(row.everyday_blocked)} "
                     f"| {recall} |")
    if board.mdd_rows:
        lines += ["", f"Headline minimum detectable difference (80% power) between {board.mdd_rows[0]} and "
                  f"{board.mdd_rows[1]}: {fmt(board.mdd.get('headline'))} points."]
    return "\n".join(lines) + "\n"


def tasks_table_markdown(board: Board) -> str:
    """Each task's test size, zero-point, reference points, MDD and where it is reported."""
    mdd_of = " vs ".join(board.mdd_rows) or "the top two rows"
    lines = [f"From `jevserve bench board` ({board.num_resamples:,} paired draws; MDD at 80% power for {mdd_of}):",
             "", "| task | test items | metric | chance | default (zero-point) | oracle | default's share of the "
             "chance-to-oracle range on train | MDD (points) | reported |", "|---|---|---|---|---|---|---|---|---|"]
    for task in board.tasks:
        ref = board.reference.get(task, {})
        where = ("apart: near-oracle" if task in board.near_oracle_tasks else "headline"
                 if task in board.headline_tasks else "all-task average")
        lines.append(f"| {task} | {ref.get('n_test') or '–'} | {ref.get('metric', '–')} | "
                     + " | ".join(fmt(ref.get(k), 3) for k in ("chance", "default", "oracle", "default_train_share"))
                     + f" | {fmt(board.mdd.get(task))} | {where} |")
    return "\n".join(lines) + "\n"
