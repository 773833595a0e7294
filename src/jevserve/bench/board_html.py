"""Render a Board as one self-contained HTML page (inline CSS, SVG interval bars, a small sorting script) and as a
markdown table. Nothing is fetched when the page is opened."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from jevserve.bench.board import Board, Cell, Row, build_board
from jevserve.bench.task import CATEGORIES

AXIS_LOW, AXIS_HIGH = -100.0, 100.0  # the bars' scale; values beyond are drawn at the edge with an arrow mark
BAR_WIDTH, BAR_HEIGHT = 96, 14
CLIP_TOLERANCE = 1e-6  # an oracle-level score of 100.00000000000001 (float noise) is not cut

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem;color:#1b1f24}
h1{font-size:1.4rem;margin:0 0 .3rem}p.lead{margin:.2rem 0 1rem;max-width:70rem;color:#444}
table{border-collapse:collapse;font-size:.8rem}th,td{padding:.25rem .4rem;border-bottom:1px solid #e3e6ea;
vertical-align:middle;text-align:right;white-space:nowrap}th{background:#f6f8fa;position:sticky;top:0;cursor:pointer;
user-select:none}th.txt,td.txt{text-align:left}tr.baseline td{color:#555;background:#fbfbfb}
td .v{display:block;font-variant-numeric:tabular-nums}td.na{color:#aaa;text-align:center}
th.cat{background:#eef3f8}.note{color:#8a6d00;font-size:.75rem}code{font-size:.75rem}
details summary{cursor:pointer;color:#0550ae}.legend{font-size:.8rem;color:#444;max-width:70rem}
td .ci{display:block;font-size:.68rem;color:#57606a;font-variant-numeric:tabular-nums}
.clip{color:#cf222e;font-weight:bold}
td.txt .note{white-space:normal;min-width:16rem;max-width:20rem}
h2{font-size:1.1rem;margin:1.4rem 0 .4rem}tr.probe td{color:#6e5600}
"""

_SCRIPT = """
document.querySelectorAll('th[data-col]').forEach(function(th){th.addEventListener('click',function(){
var t=th.closest('table'),b=t.tBodies[0],c=+th.dataset.col,asc=th.dataset.asc!=='1';
var rows=Array.from(b.rows);rows.sort(function(x,y){
var a=x.cells[c].dataset.v,z=y.cells[c].dataset.v,na=parseFloat(a),nz=parseFloat(z);
if(!isNaN(na)&&!isNaN(nz))return asc?na-nz:nz-na;if(isNaN(na)&&!isNaN(nz))return 1;if(!isNaN(na)&&isNaN(nz))return -1;
return asc?String(a).localeCompare(z):String(z).localeCompare(a);});
rows.forEach(function(r){b.appendChild(r);});t.querySelectorAll('th').forEach(function(h){h.dataset.asc='';});
th.dataset.asc=asc?'1':'0';});});
"""


def _x(value: float) -> float:
    clamped = min(max(value, AXIS_LOW), AXIS_HIGH)
    return 2 + (clamped - AXIS_LOW) / (AXIS_HIGH - AXIS_LOW) * (BAR_WIDTH - 4)


def _bar(cell: Cell) -> str:
    """An SVG with the zero line, the interval as a bar and the point as a dot."""
    zero, hundred = _x(0.0), _x(100.0)
    parts = [
        f'<svg width="{BAR_WIDTH}" height="{BAR_HEIGHT}" role="img" aria-label="{_fmt(cell)}">',
        f'<line x1="{zero:.1f}" y1="1" x2="{zero:.1f}" y2="{BAR_HEIGHT - 1}" stroke="#999" stroke-width="1"/>',
        f'<line x1="{hundred:.1f}" y1="1" x2="{hundred:.1f}" y2="{BAR_HEIGHT - 1}" stroke="#2da44e" '
        'stroke-width="1" stroke-dasharray="2,2"/>',
    ]
    if math.isfinite(cell.low) and math.isfinite(cell.high):
        parts.append(
            f'<rect x="{_x(cell.low):.1f}" y="4" width="{max(_x(cell.high) - _x(cell.low), 1):.1f}" height="6" '
            'fill="#9ecbff" rx="2"/>'
        )
    if math.isfinite(cell.score):
        colour = "#0969da" if cell.score >= 0 else "#cf222e"
        parts.append(f'<circle cx="{_x(cell.score):.1f}" cy="7" r="3" fill="{colour}"/>')
    # A value beyond the axis is drawn at the edge; a red arrow at that edge says the bar is cut there.
    low_edge, high_edge = _x(AXIS_LOW), _x(AXIS_HIGH)
    if min(cell.low, cell.score) < AXIS_LOW - CLIP_TOLERANCE:
        parts.append(f'<polygon class="clip-mark" points="{low_edge - 2:.1f},7 {low_edge + 4:.1f},1 '
                     f'{low_edge + 4:.1f},13" fill="#cf222e"/>')
    if max(cell.high, cell.score) > AXIS_HIGH + CLIP_TOLERANCE:
        parts.append(f'<polygon class="clip-mark" points="{high_edge + 2:.1f},7 {high_edge - 4:.1f},1 '
                     f'{high_edge - 4:.1f},13" fill="#cf222e"/>')
    parts.append("</svg>")
    return "".join(parts)


def _clipped(cell: Cell) -> bool:
    values = [v for v in (cell.low, cell.score, cell.high) if math.isfinite(v)]
    return bool(values) and (min(values) < AXIS_LOW - CLIP_TOLERANCE or max(values) > AXIS_HIGH + CLIP_TOLERANCE)


def _fmt(cell: Cell) -> str:
    if not math.isfinite(cell.score):
        return "–"
    if math.isfinite(cell.low):
        return f"{cell.score:.1f} [{cell.low:.1f}, {cell.high:.1f}]"
    return f"{cell.score:.1f}"


def _score_td(cell: Cell | None) -> str:
    if cell is None or not math.isfinite(cell.score):
        return '<td class="na" data-v="">–</td>'
    clip = '<span class="clip" title="beyond the ±100 axis: the bar is cut at the edge">✂</span> ' if _clipped(
        cell) else ""
    value = f'<span class="v">{clip}{cell.score:.1f}</span>'
    ci = f'<span class="ci">[{cell.low:.1f}, {cell.high:.1f}]</span>' if math.isfinite(cell.low) else ""
    return f'<td data-v="{cell.score:.4f}" title="{_fmt(cell)}">{value}{ci}{_bar(cell)}</td>'


def _rank_text(row: Row) -> str:
    if row.rank is None:
        return "–"
    r = row.rank
    return f"{r['rank']}" if r["low"] == r["high"] else f"{r['rank']} ({r['low']}–{r['high']})"


def _row_html(row: Row, board: Board) -> str:
    rank_value = str(row.rank["rank"]) if row.rank else ""
    notes = "".join(f'<div class="note">{html.escape(n)}</div>' for n in row.notes)
    cells = [
        f'<td data-v="{rank_value}">{_rank_text(row)}</td>',
        f'<td class="txt" data-v="{html.escape(row.model)}"><b>{html.escape(row.model)}</b>{notes}</td>',
        _score_td(row.average),
        _score_td(row.average_all),
        *(_score_td(row.categories.get(c)) for c in CATEGORIES),
        *(_score_td(row.tasks.get(t)) for t in board.tasks),
        f'<td class="txt" data-v="{row.date}">{row.date}</td>',
        f'<td data-v="{row.wall_s if row.wall_s is not None else ""}">'
        f'{"–" if row.wall_s is None else f"{row.wall_s:.0f} s"}</td>',
        f'<td data-v="{row.num_decisions or ""}">{"–" if not row.num_decisions else f"{row.num_decisions:,}"}</td>',
        f'<td class="txt" data-v="{html.escape(row.command)}"><code>{html.escape(row.command)}</code></td>',
    ]
    kind = "probe" if row.probe else row.kind
    return f'<tr class="{html.escape(kind)}">' + "".join(cells) + "</tr>"


def _table(rows: list[Row], board: Board, table_id: str) -> str:
    headers = ["rank", "model", "headline average", "all tasks"] + list(CATEGORIES) + list(board.tasks) + [
        "date", "wall time", "decisions", "reproduce"]
    classes = ["", "txt", "", ""] + ["cat"] * len(CATEGORIES) + [""] * len(board.tasks) + ["txt", "", "", "txt"]
    head = "".join(
        f'<th class="{c}" data-col="{i}" title="click to sort">{html.escape(h)}</th>'
        for i, (h, c) in enumerate(zip(headers, classes, strict=True))
    )
    body = "\n".join(_row_html(r, board) for r in rows)
    return (f'<div style="overflow-x:auto"><table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>\n{body}\n'
            "</tbody></table></div>")


def _reference_value(value: Any) -> str:
    return "–" if value is None or not math.isfinite(float(value)) else f"{float(value):.3f}"


def _reference_table(board: Board) -> str:
    rows = "".join(
        f'<tr><td class="txt">{html.escape(t)}</td><td class="txt">{html.escape(board.reference[t]["metric"])}</td>'
        f'<td>{_reference_value(board.reference[t]["default"])}</td>'
        f'<td>{_reference_value(board.reference[t]["oracle"])}</td>'
        f'<td class="txt">{"yes" if t in board.headline_tasks else "no (reported beside it)"}</td></tr>'
        for t in board.tasks if t in board.reference
    )
    return ('<table id="reference"><thead><tr><th class="txt">task</th><th class="txt">metric</th>'
            "<th>default (score 0)</th><th>oracle (score 100)</th><th class=\"txt\">in headline average</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>")


def render_html(board: Board) -> str:
    """The whole page: ranked rows, leak probes in their own table, and each task's raw reference points."""
    ranked = [r for r in board.rows if not r.probe]
    probes = [r for r in board.rows if r.probe]
    warnings = "".join(f'<p class="note">{html.escape(w)}</p>' for w in board.warnings)
    task_list = ", ".join(f"{html.escape(t)} ({board.task_categories[t]})" for t in board.tasks)
    probe_html = ("<h2>Leak probes (not ranked)</h2><p class=\"legend\">Rows that know where an item came from, "
                  "not what it says. A probe near 100 means the task's sources give its labels away.</p>"
                  + _table(probes, board, "probes")) if probes else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>JevServe-Bench leaderboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_CSS}</style></head><body>
<h1>JevServe-Bench leaderboard</h1>
<p class="lead">Each task is one serving decision. Score = 100 × (m − m<sub>default</sub>) / (m<sub>oracle</sub> −
m<sub>default</sub>): 0 is what a serving system does today without a decision model (its default rule, or chance),
100 an oracle that knows the outcome; below 0 is worse than today's rule. Under each score: its 95% bootstrap
interval over test items ({board.num_resamples} resamples); bars show it on an axis from −100 to 100 (green dashes
at 100), and a red arrow and ✂ mark a bar cut at the axis. The headline average covers
{len(board.headline_tasks)} tasks; "all tasks" adds the ones reported beside it. Ranks come from paired resamples of
the headline average (the range is the 95% interval of the rank). <b>tfidf-lr</b> is the supervised specialist per
task (TF-IDF + logistic regression on the task's train side): a general decision model should beat it. Click a
column to sort.</p>
{warnings}
{_table(ranked, board, "rows")}
{probe_html}
<h2>Reference points per task (raw metric on the test side)</h2>
{_reference_table(board)}
<details class="legend"><summary>tasks and rows</summary>
<p>Tasks: {task_list}. Category columns average the row's tasks in that category. <b>default-rules</b> is 0 by
definition. <b>source-style</b> (a logistic regression on surface features: length, punctuation, character classes)
and <b>source-majority</b> (the majority label of the item's source package) exist only for tasks that pool
positives and negatives from different sources. Every number is regenerated by the command in its row, then
<code>jevserve bench board</code>; docs/bench.md describes each task.</p>
</details>
<script>{_SCRIPT}</script>
</body></html>
"""


def _md_row(row: Row) -> str:
    cats = " | ".join(_fmt(row.categories[c]) if c in row.categories else "–" for c in CATEGORIES)
    wall = "–" if row.wall_s is None else f"{row.wall_s:.0f} s"
    decisions = "–" if not row.num_decisions else f"{row.num_decisions:,}"
    overall = _fmt(row.average_all) if row.average_all else "–"
    return (f"| {_rank_text(row)} | {row.model} | {_fmt(row.average)} | {overall} | {cats} | {row.date} | {wall} | "
            f"{decisions} |")


def render_markdown(board: Board) -> str:
    """A markdown summary: ranks with averages and categories, leak probes apart, every task score per row."""
    header = ["| rank | model | headline average | all tasks | " + " | ".join(CATEGORIES) + " | date | wall time | "
              "decisions |", "|---|---|---|---|" + "---|" * len(CATEGORIES) + "---|---|---|"]
    ranked = [r for r in board.rows if not r.probe]
    probes = [r for r in board.rows if r.probe]
    lines = [
        "# JevServe-Bench leaderboard",
        "",
        "Score = 100 × (m − m_default) / (m_oracle − m_default): 0 = what a system does today without a decision "
        "model (its default rule, or chance), 100 = oracle; 95% bootstrap intervals over test items "
        f"({board.num_resamples} resamples). The headline average covers {len(board.headline_tasks)} tasks (every "
        "task but those reported beside it); ranks: paired resamples of the headline average, drawn jointly across "
        "tasks (rank interval in brackets). tfidf-lr is the supervised per-task specialist a general model should "
        "beat. The HTML board is docs/board/index.html; docs/bench.md describes the tasks.",
        "",
        *header,
        *(_md_row(r) for r in ranked),
    ]
    if probes:
        lines += ["", "## Leak probes (not ranked)", "", "Rows that know an item's source, not its content.", "",
                  *header, *(_md_row(r) for r in probes)]
    shown = ranked + probes
    lines += ["", "## Per task", "", "| task | category | metric | default | oracle | " + " | ".join(
        r.model for r in shown) + " |", "|---|---|---|---|---|" + "---|" * len(shown)]
    for task in board.tasks:
        ref = board.reference.get(task, {})
        cells = " | ".join(_fmt(r.tasks[task]) if task in r.tasks else "–" for r in shown)
        name = task if task in board.headline_tasks else f"{task} (beside the headline)"
        lines.append(f"| {name} | {board.task_categories[task]} | {ref.get('metric', '–')} | "
                     f"{_reference_value(ref.get('default'))} | {_reference_value(ref.get('oracle'))} | {cells} |")
    lines += ["", "## Reproduce", ""]
    lines += [f"- {r.model}: `{r.command}`" + (f" ({'; '.join(r.notes)})" if r.notes else "") for r in shown]
    lines += [f"- note: {w}" for w in board.warnings]
    return "\n".join(lines) + "\n"


def write_board(results_dir: Path, out_dir: Path, markdown_path: Path) -> list[Path]:
    """Build the board from `results_dir`, write out_dir/index.html and the markdown file; returns both paths."""
    board = build_board(results_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / "index.html"
    page.write_text(render_html(board), encoding="utf-8")
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown_path.write_text(render_markdown(board), encoding="utf-8")
    return [page, markdown_path]
