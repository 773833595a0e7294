"""Render a Board as one self-contained HTML page that fits a 1,440-px screen: a headline table (with a column
picker), one narrow table per category, the near-oracle tasks apart, everyday false actions, paired differences,
each task's reference points and MDD, leak probes, and the forest plots written beside the page. Nothing is fetched
when the page is opened."""

from __future__ import annotations

import html
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jevserve.bench.board import Board, Cell, Row
from jevserve.bench.board_markdown import fmt, pct, rank_text
from jevserve.bench.cells import TaskCell
from jevserve.bench.task import CATEGORIES

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.2rem;color:#1b1f24;max-width:88rem}
h1{font-size:1.4rem;margin:0 0 .3rem}h2{font-size:1.1rem;margin:1.5rem 0 .4rem}p{max-width:72rem}
table{border-collapse:collapse;font-size:.8rem;max-width:100%;margin:.3rem 0}
th,td{padding:.25rem .45rem;border-bottom:1px solid #e3e6ea;text-align:right;vertical-align:top}
th{background:#f6f8fa;font-weight:600}.txt{text-align:left}td.na{color:#aaa;text-align:center}
.ci{display:block;font-size:.7rem;color:#57606a;font-variant-numeric:tabular-nums;white-space:nowrap}
.v{font-variant-numeric:tabular-nums;font-weight:600;white-space:nowrap}.sub{display:block;font-size:.7rem;color:#57606a}
.note{display:block;color:#8a6d00;font-size:.72rem;font-weight:400;max-width:22rem}
tr.baseline td{background:#fbfbfb}tr.peer td{background:#f7f3ff}.picker{font-size:.8rem;margin:.3rem 0}
.picker label{margin-right:.8rem}.legend{font-size:.8rem;color:#444}code{font-size:.75rem;word-break:break-all}
code.cmd{white-space:pre-wrap}
.hide-cat .cat,.hide-all .all{display:none}img.plot{max-width:100%;height:auto;border:1px solid #eee}
.pos{color:#1a7f37}.neg{color:#cf222e}ul.cmd li{margin:.2rem 0}
"""

_SCRIPT = """
document.querySelectorAll('.picker input').forEach(function(box){box.addEventListener('change',function(){
document.getElementById(box.dataset.table).classList.toggle(box.dataset.hide,!box.checked);});});
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _score_td(cell: Cell | TaskCell | None, extra: str = "", css: str = "") -> str:
    if cell is None or not math.isfinite(cell.score):
        return f'<td class="na {css}">–</td>'
    ci = f'<span class="ci">[{cell.low:.1f}, {cell.high:.1f}]</span>' if math.isfinite(cell.low) else ""
    return f'<td class="{css}"><span class="v">{cell.score:.1f}</span>{ci}{extra}</td>'


def _category_td(board: Board, row: Row, category: str) -> str:
    """A row's category average, marked when it averages fewer of the category's tasks than a full row does."""
    covered, of = board.coverage(row.tasks, category)
    partial = f'<span class="sub">{covered} of {of} tasks</span>' if covered < of else ""
    return _score_td(row.categories.get(category), partial, css="cat")


def _row_name(row: Row, notes: bool = True) -> str:
    # Notes (why a row is unranked, where its results come from) once, in the headline and rows tables.
    text = "".join(f'<span class="note">{_esc(n)}</span>' for n in row.notes) if notes else ""
    return f'<td class="txt"><b>{_esc(row.model)}</b>{text}</td>'


def _rate_td(rate: dict[str, Any] | None) -> str:
    if not rate or not rate.get("n"):
        return '<td class="na">–</td>'
    low, high = rate["interval"]
    return f'<td><span class="v">{pct(rate["rate"])}</span><span class="ci">[{pct(low)}, {pct(high)}]</span></td>'


def _mean_recall(row: Row, tasks: Sequence[str]) -> dict[str, Any] | None:
    recalls = [row.everyday[t]["at_1pct"]["recall"]["rate"] for t in tasks
               if t in row.everyday and "at_1pct" in row.everyday[t]]
    return {"n": len(recalls), "rate": sum(recalls) / len(recalls), "interval": [math.nan, math.nan]} if recalls \
        else None


def headline_table(board: Board, rows: Sequence[Row]) -> str:
    """Ranked rows: rank, headline, all tasks, categories, and what the guard decisions cost on everyday traffic."""
    guard = [t for t in board.tasks if board.task_categories.get(t) == "guard"]
    cats = [c for c in CATEGORIES if any(board.task_categories.get(t) == c for t in board.tasks)]
    head = ("<tr><th>rank</th><th class='txt'>row</th><th>headline</th><th class='all'>all tasks</th>"
            + "".join(f"<th class='cat'>{c}</th>" for c in cats)
            + "<th>everyday blocked</th><th>recall at 1%</th></tr>")
    body = []
    for row in rows:
        recall = _mean_recall(row, guard)
        recall_td = (f'<td><span class="v">{pct(recall["rate"])}</span><span class="sub">mean of '
                     f'{recall["n"]}</span></td>') if recall else '<td class="na">–</td>'
        body.append(
            f'<tr class="{_esc(row.kind)}"><td>{rank_text(row)}</td>{_row_name(row)}{_score_td(row.average)}'
            + _score_td(row.average_all, css="all") + "".join(_category_td(board, row, c) for c in cats)
            + _rate_td(row.everyday_blocked) + recall_td + "</tr>")
    picker = ('<div class="picker"><label><input type="checkbox" checked data-table="headline" data-hide="hide-cat">'
              'category averages</label><label><input type="checkbox" checked data-table="headline" '
              'data-hide="hide-all">all-task average</label></div>')
    return f'{picker}<table id="headline"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _grid(rows: Sequence[Row], tasks: Sequence[str], render: Callable[[Row, str], str], table_id: str) -> str:
    """One row per board row, one column per task, each cell drawn by `render(row, task)`."""
    head = "<tr><th class='txt'>row</th>" + "".join(f"<th>{_esc(t)}</th>" for t in tasks) + "</tr>"
    body = "".join(f'<tr class="{_esc(r.kind)}">{_row_name(r, notes=False)}{"".join(render(r, t) for t in tasks)}'
                   "</tr>" for r in rows)
    return f'<table id="{table_id}"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _score_and_gap(row: Row, task: str) -> str:
    cell = row.cells.get(task)
    gap = f'<span class="sub">gap {cell.gap_share:.0f}%</span>' if cell and math.isfinite(cell.gap_share) else ""
    return _score_td(cell, gap)


def _difference(row: Row, task: str) -> str:
    c = row.cells.get(task)
    if c is None:
        return '<td class="na">–</td>'
    return (f'<td><span class="v">{c.difference:+.3f}</span><span class="ci">[{c.difference_low:+.3f}, '
            f'{c.difference_high:+.3f}]</span><span class="sub">beats the rule on {pct(c.p_beats_rule)} of draws'
            "</span></td>")


def _everyday_cell(row: Row, task: str) -> str:
    e = row.everyday.get(task)
    if not e:
        return '<td class="na">–</td>'
    recall = e.get("at_1pct", {}).get("recall")
    extra = f'<span class="sub">recall at 1%: {pct(recall["rate"])}</span>' if recall else ""
    return (f'<td><span class="v">{pct(e["rate"])}</span><span class="ci">[{pct(e["interval"][0])}, '
            f'{pct(e["interval"][1])}]</span>{extra}</td>')


def category_table(board: Board, category: str, rows: Sequence[Row]) -> str:
    """Every row's cells on one category's tasks: the score and, beneath, the share of the default's gap closed."""
    tasks = [t for t in board.tasks if board.task_categories.get(t) == category and t not in board.near_oracle_tasks]
    shown = [r for r in rows if any(t in r.cells for t in tasks)]
    if not tasks or not shown:
        return ""
    return f"<h3>{_esc(category)}</h3>" + _grid(shown, tasks, _score_and_gap, f"category-{_esc(category)}")


def near_oracle_table(board: Board, rows: Sequence[Row]) -> str:
    """Tasks whose default rule is near the oracle on train: the raw difference from the rule and P(beats it)."""
    if not board.near_oracle_tasks:
        return ""
    return _grid(rows, board.near_oracle_tasks, _difference, "near-oracle")


def everyday_table(board: Board, rows: Sequence[Row]) -> str:
    """Per task: the false-action rate on everyday test requests at the task's threshold, and recall at 1%."""
    tasks = [t for t in board.tasks if any(t in r.everyday for r in rows)]
    shown = [r for r in rows if r.everyday]
    if not tasks or not shown:
        return "<p>No row has everyday rates yet.</p>"
    return _grid(shown, tasks, _everyday_cell, "everyday")


def pairs_table(board: Board) -> str:
    """Headline Δ (row − column) with its interval and P(Δ > 0) for every pair of ranked rows; columns are numbered
    by the rows' order so the matrix stays narrow."""
    names = list(dict.fromkeys(p.a for p in board.pairs))
    if len(names) < 2:
        return ""
    by_pair = {(p.a, p.b): p for p in board.pairs}
    head = ("<tr><th class='txt'>row − column</th>"
            + "".join(f"<th title='{_esc(n)}'>{k + 1}</th>" for k, n in enumerate(names)) + "</tr>")
    body = []
    for k, a in enumerate(names):
        tds = []
        for b in names:
            p = by_pair.get((a, b))
            if p is None:
                tds.append('<td class="na">·</td>')
                continue
            tone = "pos" if p.low > 0 else "neg" if p.high < 0 else ""
            tds.append(f'<td class="{tone}"><span class="v">{p.delta:+.1f}</span><span class="ci">[{p.low:+.1f}, '
                       f'{p.high:+.1f}]</span><span class="sub">P {p.p_greater:.2f}</span></td>')
        body.append(f'<tr><td class="txt">{k + 1}. <b>{_esc(a)}</b></td>{"".join(tds)}</tr>')
    return f'<table id="pairs"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def reference_table(board: Board) -> str:
    """Each task's test size, reference points, train-side default share, MDD and where it is reported."""
    mdd_rows = " vs ".join(board.mdd_rows) if board.mdd_rows else "the top two rows"
    head = ("<tr><th class='txt'>task</th><th>test items</th><th class='txt'>metric</th><th>chance</th>"
            f"<th>default (0)</th><th>oracle</th><th>default's share on train</th><th>MDD ({_esc(mdd_rows)})</th>"
            "<th class='txt'>reported</th></tr>")
    body = []
    for task in board.tasks:
        ref = board.reference.get(task, {})
        where = ("apart (near-oracle)" if task in board.near_oracle_tasks else "headline"
                 if task in board.headline_tasks else "beside the headline")
        body.append(
            f"<tr><td class='txt'>{_esc(task)}</td><td>{ref.get('n_test') or '–'}</td>"
            f"<td class='txt'>{_esc(ref.get('metric', '–'))}</td>"
            + "".join(f"<td>{fmt(ref.get(k), 3)}</td>" for k in ("chance", "default", "oracle", "default_train_share"))
            + f"<td>{fmt(board.mdd.get(task), 1)}</td><td class='txt'>{where}</td></tr>")
    return f'<table id="reference"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def rows_table(rows: Sequence[Row]) -> str:
    """What each row is: kind, parameters, where it runs, decision latency, licence, date and the command."""
    keys = ("parameters", "runs", "latency", "licence")
    # `latency` holds the rate one bench run asked at (requests/s), measured by whoever ran it
    shown = {"latency": "speed (self-measured)"}
    head = ("<tr><th class='txt'>row</th><th class='txt'>kind</th>" + "".join(f"<th class='txt'>{shown.get(k, k)}"
                                                                              "</th>" for k in keys)
            + "<th class='txt'>date</th><th class='txt'>reproduce</th></tr>")

    def more(row: Row) -> str:  # what else a row says of itself (`--metadata source=...`): kept, so shown
        extra = [f"{k}: {v}" for k, v in row.metadata.items() if k not in keys]
        # cut, and free to wrap anywhere: one 807-character value made the page 6,350 px wide
        return "".join(f"<br><span class='note' style='overflow-wrap:anywhere'>"
                       f"{_esc(line if len(line) <= 200 else line[:199] + '…')}</span>" for line in extra)

    body = "".join(
        f"<tr>{_row_name(r)}<td class='txt'>{_esc(r.kind)}</td>"
        + "".join(f"<td class='txt'>{_esc(r.metadata.get(k, '–'))}</td>" for k in keys)
        + f"<td class='txt'>{_esc(r.date)}</td><td class='txt'><code class='cmd'>{_esc(r.command)}</code>{more(r)}"
        "</td></tr>"
        for r in rows)
    return f'<table id="rows"><thead>{head}</thead><tbody>{body}</tbody></table>'


def render_html(board: Board, *, plots: bool = True) -> str:
    """The whole page."""
    ranked = [r for r in board.rows if not r.probe and math.isfinite(r.average.score)]
    others = [r for r in board.rows if not r.probe and r not in ranked]
    probes = [r for r in board.rows if r.probe]
    warnings = (f'<details class="legend"><summary>{len(board.warnings)} note(s) on cells left out</summary>'
                + "".join(f'<p class="note">{_esc(w)}</p>' for w in board.warnings) + "</details>"
                if board.warnings else "")
    sections = "".join(category_table(board, c, [*ranked, *others]) for c in CATEGORIES)
    images = ('<img class="plot" id="headline-plot" src="headline.png" alt="forest plot of headline averages">'
              if plots else "")
    deltas = ('<img class="plot" id="deltas-plot" src="task-deltas.png" alt="paired differences per task">'
              if plots else "")
    apart = near_oracle_table(board, [*ranked, *others])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>JevServe-Bench leaderboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head><body>
<h1>JevServe-Bench leaderboard</h1>
<p>Each task is one serving decision. Score = 100 × (m − m<sub>default</sub>) / (m<sub>oracle</sub> −
m<sub>chance</sub>): 0 is what a serving system does today without a decision model (its default rule, or chance);
the denominator is fixed on the whole test side, the numerator paired on each of {board.num_resamples:,} bootstrap
draws, and every cell, average, rank and difference below comes from those same draws (95% intervals in brackets).
The headline average covers {len(board.headline_tasks)} tasks; tasks whose default rule is near the oracle on train
are reported apart. Rank: 1 + the rows ahead of it, those whose paired difference over it has a 95% interval wholly
above 0 (LMArena's rule on the paired difference); in brackets the range of ranks over draws.
<b>Everyday blocked</b>: the share of ordinary user requests that the row's guard decisions, at
their thresholds, would act on; <b>recall at 1%</b>: the share of attacks still caught when the threshold is set
for 1% everyday false actions.</p>
<h2>Headline</h2>
{headline_table(board, ranked)}
{images}
<h2>Per task, by category</h2>
<p class="legend">Score [95% interval]; beneath, the share of the gap between the default rule and the oracle
closed.</p>
{sections}
{"<h2>Near-oracle tasks (reported apart)</h2>" + apart if apart else ""}
<h2>Everyday traffic</h2>
<p class="legend">False-action rate on everyday test requests at each task's threshold [exact 95% interval];
beneath, recall on the task's test positives at the threshold set for 1% false actions on the calibration file.</p>
{everyday_table(board, [*ranked, *others])}
<h2>Paired differences of the headline</h2>
{pairs_table(board)}
{deltas}
<h2>Tasks: test size, reference points and the minimum detectable difference (80% power)</h2>
{reference_table(board)}
{"<h2>Leak probes (not ranked)</h2>" + headline_table(board, probes) if probes else ""}
<h2>Rows</h2>
{rows_table(board.rows)}
{warnings}
<script>{_SCRIPT}</script>
</body></html>
"""


def write_board(results_dir: Path, out_dir: Path, markdown_path: Path,
                warnings_out: list[str] | None = None) -> list[Path]:
    """Build the board from `results_dir`; write out_dir/index.html, the forest plots, the snapshot (board.json)
    and the markdown file; returns the paths. The board's warnings (files left out, rows not ranked) are added to
    `warnings_out` when given."""
    from jevserve.bench.board import build_board
    from jevserve.bench.board_markdown import render_markdown
    from jevserve.bench.board_plots import write_plots
    from jevserve.bench.board_snapshot import results_key, write_snapshot

    board = build_board(results_dir)
    if warnings_out is not None:
        warnings_out.extend(board.warnings)
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / "index.html"
    page.write_text(render_html(board), encoding="utf-8")
    plots = write_plots(board, out_dir)
    snapshot = write_snapshot(board, results_key(results_dir), out_dir / "board.json")
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    # the markdown names the HTML board where it was written: relative to the markdown's folder where it can
    html = os.path.relpath(page, markdown_path.parent) if page.is_absolute() == markdown_path.is_absolute() else page
    markdown_path.write_text(render_markdown(board, str(html)), encoding="utf-8")
    return [page, markdown_path, snapshot, *plots]
