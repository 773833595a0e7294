"""The reading pages: the board (filters and sort as query parameters), a model, a task, and the methodology."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from jevserve.bench.board import Board, Cell, Row, scored
from jevserve.bench.task import CATEGORIES
from jevserve.web.context import (
    MAX_LIVE_CHARS,
    MAX_LIVE_FORM_BYTES,
    PENDING,
    Context,
    PageError,
    keep_session,
    read_form,
    retry_after,
    start_session,
)
from jevserve.web.decisions import DECISIONS, TASK_DECISION
from jevserve.web.humans import NUM_RESAMPLES, HumanCell, category_cells, counted, human_cells
from jevserve.web.store import pseudonym

log = logging.getLogger("jevserve.web")
PEOPLE_ROW = "people (playground)"
LIVE_RETRY_S = 30  # what a live request is told while the demo's thresholds are being set


def _sort_key(cell: Any, partial: bool = False) -> tuple[int, float]:
    # complete cells first (best first), then cells that average fewer of their category's tasks, then none
    if cell is None or not math.isfinite(cell.score):
        return (2, 0.0)
    return (1 if partial else 0, -cell.score)


def board_rows(
    board: Board, people: dict[str, HumanCell], sort: str | None, *, num_rounds: int | None = None
) -> list[dict[str, Any]]:
    """The board's rows plus the people row, as the template reads them, sorted by `sort` (a column key).

    Each row carries, per category, how many of the category's tasks its average covers ("coverage": (n, of)), so
    a partial average is marked and sorted after the complete ones; near-oracle tasks are shown by their raw
    difference from the rule ("near": task → bench TaskCell), as the static board shows them."""
    by_category = board.category_tasks()
    rows: list[dict[str, Any]] = [
        {"model": r.model, "kind": r.kind, "rank": r.rank, "average": r.average, "categories": r.categories,
         "tasks": r.tasks, "notes": r.notes, "link": True,
         "near": {t: c for t, c in r.cells.items() if t in board.near_oracle_tasks}} for r in board.rows
    ]
    if people:
        headline = sum(scored(people.get(t)) for t in board.headline_tasks)
        rows.append({
            "model": PEOPLE_ROW, "kind": "people", "rank": None, "average": None,
            "categories": category_cells(people, by_category), "tasks": dict(people), "link": False, "near": {},
            "notes": (f"covers {headline} of {len(board.headline_tasks)} headline tasks: not ranked",
                      _rounds_note(people, num_rounds),
                      f"intervals resample players ({NUM_RESAMPLES:,} draws of its own, not the board's)"),
        })
    for row in rows:
        # a task counts where its cell has a score: an undefined one ("–") is not in the category's average
        row["coverage"] = {c: board.coverage(row["tasks"], c) for c in by_category if c in row["categories"]}
    if sort:
        def key(row: dict[str, Any]) -> tuple[int, float]:
            if sort == "average":
                return _sort_key(row["average"])
            if sort.startswith("category:"):
                name = sort.split(":", 1)[1]
                covered, of = row["coverage"].get(name, (0, 0))
                return _sort_key(row["categories"].get(name), partial=covered < of)
            name = sort.split(":", 1)[-1]
            near = row["near"].get(name)
            if near is not None:  # a near-oracle column sorts by the raw difference it shows
                return _sort_key(Cell(near.difference, near.difference_low, near.difference_high))
            return _sort_key(row["tasks"].get(name))
        rows.sort(key=key)
    return rows


def _rounds_note(people: dict[str, HumanCell], num_rounds: int | None = None) -> str:
    """"N rounds · M answers": the rounds with an answer that counts (`num_rounds`, from the answers themselves; a
    round left part-answered or answered too fast asks not every decision, so no task's count is the rounds')."""
    rounds = num_rounds if num_rounds is not None else max(c.num_rounds for c in people.values())
    answers = sum(c.num_answers for c in people.values())
    return f"{rounds} round{'s' if rounds != 1 else ''} · {answers} answer{'s' if answers != 1 else ''}"


def _people(context: Context) -> dict[str, HumanCell]:
    version = context.store.answers_version()
    site = context.site.get()
    cached = context.memo.get("__people__")
    if cached and cached[0] == version and cached[1] is site:
        return cached[2]
    answers, _ = counted(context.store.answer_rows(), context.settings.min_answer_ms)
    cells = human_cells(answers, site.refs) if version else {}
    context.memo["__people__"] = (version, site, cells, len({a["round_id"] for a in answers}))
    return cells


def _people_rounds(context: Context) -> int | None:
    """The rounds with a counted answer, counted with the cells `_people` last made."""
    cached = context.memo.get("__people__")
    return cached[3] if cached else None


def _people_note(context: Context, people: dict[str, HumanCell]) -> str | None:
    """Why there is no people row although people have played: outside a checkout, the board packaged with jevserve
    carries no per-item labels and default and oracle actions, which scoring an answer needs."""
    if people or not context.store.answers_version() or context.site.get().refs:
        return None
    return ("The playground's answers are not scored on this board: scoring them needs each item's label and the "
            "default and oracle actions from the bench results files, which a checkout's results/ holds (the board "
            "packaged with jevserve has only the scores). /people lists the answers.")


def _row(board: Board, name: str) -> Row:
    row = next((r for r in board.rows if r.model == name), None)
    if row is None:
        raise PageError(404, f"no board row named {name!r}; rows: {', '.join(r.model for r in board.rows)}")
    return row


def register(app: FastAPI, context: Context) -> None:
    """Add the reading pages' routes."""

    @app.get("/", response_class=HTMLResponse)
    def board_page(request: Request, category: str = "", kind: str = "", sort: str = "") -> HTMLResponse:
        board = context.site.board()
        if category and category not in CATEGORIES:
            raise PageError(400, f"unknown category {category!r}; expected one of: {', '.join(CATEGORIES)}")
        kinds = [*sorted({r.kind for r in board.rows}), "people"]  # whatever kinds the results hold
        if kind and kind not in kinds:
            raise PageError(400, f"unknown kind {kind!r}; expected one of: {', '.join(kinds)}")
        columns = {"average", *(f"category:{c}" for c in CATEGORIES), *(f"task:{t}" for t in board.tasks)}
        if sort and sort not in columns:
            raise PageError(400, f"unknown sort column {sort!r}; expected average, category:<name> or task:<name>")
        # Task columns only within one category: all 16 at once would not fit a screen (pick a category to see them).
        tasks = [t for t in board.tasks if category and board.task_categories[t] == category]
        if not category and sort.startswith("task:"):  # task columns show within their category only
            home = board.task_categories[sort.split(":", 1)[1]]
            raise PageError(400, f"sort column {sort!r} is shown on the {home} view: /?category={home}&sort={sort}")
        if category and sort.startswith(("task:", "category:")) and sort.split(":", 1)[1] not in (category, *tasks):
            # sorting by a column the view does not show would order the rows by numbers nobody can see
            raise PageError(400, f"sort column {sort!r} is not on the {category} view; sort by average, "
                                 f"category:{category} or one of its tasks ({', '.join(tasks)}), or drop category")
        people = _people(context)
        rows = [r for r in board_rows(board, people, sort, num_rounds=_people_rounds(context))
                if not kind or r["kind"] == kind]
        hidden = {r.model for r in board.rows} - {r["model"] for r in rows}
        # a note about a row the kind filter hides is left out with the row
        warnings = [w for w in board.warnings if w.split(":", 1)[0] not in hidden]
        categories = [c for c in CATEGORIES if any(board.task_categories[t] == c for t in board.tasks)]
        return context.render(
            request, "board.html", board=board, rows=rows, tasks=tasks, categories=categories,
            shown_categories=[category] if category else categories, category=category, kind=kind, kinds=kinds,
            sort=sort, playground_tasks=TASK_DECISION, people_note=_people_note(context, people), warnings=warnings,
            other_tasks=[t for t in board.tasks if t not in board.headline_tasks and t not in board.near_oracle_tasks],
        )

    @app.get("/plots/{name}.png")
    def plot(name: str) -> Response:
        if name not in ("headline", "task-deltas"):
            raise PageError(404, f"no plot named {name!r}; plots: headline, task-deltas")
        return Response(context.plot(name), media_type="image/png")

    @app.get("/models/{name}", response_class=HTMLResponse)
    def model_page(request: Request, name: str) -> Response:
        board = context.site.board()
        filed_as = context.settings.board_names.get(name)
        if filed_as and not any(r.model == name for r in board.rows) and any(r.model == filed_as for r in board.rows):
            # the name the playground and /v1/models show leads to the row its results are filed under
            return RedirectResponse(f"/models/{quote(filed_as, safe='')}", status_code=308)
        row = _row(board, name)
        document = context.site.get().documents.get(name)
        curve = _reliability(context, name, document) if document else None
        preparing, failed = curve is PENDING, curve if isinstance(curve, Exception) else None
        if preparing or failed is not None:
            curve = None
        from jevserve.web.calibration import reliability_svg

        return context.render(
            request, "model.html", row=row, notes=row.notes, document=document, board=board,
            # the folder's own name, not its path on the server (a public deployment's layout is nobody's business)
            results_dir=Path(context.settings.results_dir).resolve().name if context.settings.results_dir
            else "results",
            curve=curve, svg=reliability_svg(curve) if curve else None, preparing=preparing,
            failed=f"{type(failed).__name__}: {failed}" if failed is not None else None,
        )

    @app.get("/tasks/{name}", response_class=HTMLResponse)
    def task_page(request: Request, name: str) -> HTMLResponse:
        from jevserve.bench import TASKS

        if name not in TASKS:
            raise PageError(404, f"no task named {name!r}; tasks: {', '.join(TASKS)}")
        from jevserve.web.site import TaskDescription, task_questions_json

        site = context.site.get()
        baseline = site.documents.get("default-rules", {}).get("tasks", {}).get(name)
        task = context.task_page_if_ready(name, baseline)
        if isinstance(task, FileNotFoundError):
            context.task_pages.pop(name, None)
            raise PageError(404, f"task {name}'s data is not on this machine: {task}")
        if isinstance(task, Exception):
            context.task_pages.pop(name, None)
            raise task
        if task is None:  # its reference rows are still being read: the rest of the page does not wait for them
            task = TaskDescription(name, TASKS[name].category, None, task_questions_json(name))
        board = context.site.board()
        rows = [(r.model, r.cells.get(name) or r.tasks[name], True) for r in board.rows if name in r.tasks]
        people = _people(context)
        if name in people:
            rows.append((PEOPLE_ROW, people[name], False))
        if task.rows is not None:
            task = replace(task, rows=tuple(_board_source_only(board, name, site.documents.get("default-rules"))
                                            if label == "source-only check" else (label, value)
                                            for label, value in task.rows))
        return context.render(request, "task.html", task=task, rows=rows, near=name in board.near_oracle_tasks,
                              decision=DECISIONS.get(TASK_DECISION.get(name, "")))

    @app.get("/live", response_class=HTMLResponse)
    def live_page(request: Request) -> HTMLResponse:
        live = context.settings.live
        return context.render(request, "live.html", live=live, result=None, text="", route="",
                              max_chars=MAX_LIVE_CHARS)

    @app.post("/live", response_class=HTMLResponse)
    async def live_decide(request: Request) -> HTMLResponse:
        form = await read_form(request, MAX_LIVE_FORM_BYTES, too_large=f"the request text is more than "
                               f"{MAX_LIVE_CHARS:,} characters (the form is over {MAX_LIVE_FORM_BYTES:,} bytes); at "
                               f"most {MAX_LIVE_CHARS:,} characters here")
        live = context.settings.live
        if live is None:
            raise PageError(503, "the live demo is not configured here (start the site with `jevserve web`)")
        text, route = form.get("text", "").strip(), form.get("route", "")
        if not any(c.isprintable() and not c.isspace() for c in text):  # NUL or zero-width characters only
            raise PageError(400, "the request text is empty; type the request to decide on")
        if "\x00" in text:  # no textarea can hold one, and echoed into the page it is no HTML
            raise PageError(400, "the request text holds a NUL character (U+0000), which no page can show; remove it")
        # characters as the textarea's maxlength counts them: UTF-16 code units, a line break (sent as CRLF) one, an
        # emoji two (which the browser counts and Python's len does not)
        length = len(text.replace("\r\n", "\n").encode("utf-16-le")) // 2
        if length > MAX_LIVE_CHARS:
            raise PageError(413, f"the request text is {length:,} characters; at most {MAX_LIVE_CHARS:,} here")
        if route and route not in live.routes:
            raise PageError(400, f"unknown route {route[:60]!r}; expected one of: {', '.join(live.routes)}")
        if live.preparing:  # scoring the calibration requests for this model: minutes, the first time on a machine
            raise PageError(503, "the live demo is still setting the gateway's thresholds for this model (it scores "
                                 "the gateway's calibration requests once, a few minutes the first time on a "
                                 f"machine); try again in {LIVE_RETRY_S} seconds",
                            headers=retry_after(LIVE_RETRY_S))
        # The demo's cache is the visitor's own (its tenant comes from the session), so a repeat is served from it
        # only when this visitor typed it before: another visitor's text is never found there.
        session, fresh = start_session(request, context.session_key)
        result = await live.run(text, route or None, tenant=f"web-live:{pseudonym(session)}")
        if result.error:  # the page says only that it failed: the why (a backend URL) is the host's
            log.warning("the live demo's decision model gave no answer: %s", result.error)
        page = context.render(request, "live.html", live=live, result=result, text=text, route=route,
                              max_chars=MAX_LIVE_CHARS)
        return keep_session(page, session) if fresh else page

    @app.get("/methodology", response_class=HTMLResponse)
    def methodology_page(request: Request) -> HTMLResponse:
        board = context.site.board()
        return context.render(request, "methodology.html", board=board, decisions=DECISIONS.values(),
                              other_tasks=[t for t in board.tasks if t not in board.headline_tasks
                                           and t not in board.near_oracle_tasks])


def _board_source_only(board: Board, name: str, baseline: dict[str, Any] | None) -> tuple[str, str]:
    """The source-only check row with each leak probe's score and interval as the board's table below shows them
    (its shared draws), not as the probe's own run drew them: one cell, one interval on the page."""
    from jevserve.web.site import inline_markdown

    result = (baseline or {}).get("tasks", {}).get(name) or {}
    if not result.get("source_only"):
        return ("source-only check", inline_markdown("not needed: all items come from one source" if result else "–"))
    parts = []
    for probe in result["source_only"]:
        value = result.get("metrics", {}).get(probe, {}).get("value")
        cell = next((r.tasks.get(name) for r in board.rows if r.model == probe), None)
        shown = f"{value:.3f}" if value is not None else "–"
        parts.append(f"{probe} {shown} → score {cell.score:.1f} [{cell.low:.1f}, {cell.high:.1f}]" if cell
                     else f"{probe} {shown} → not on the board")
    return ("source-only check", inline_markdown("; ".join(parts) + " (intervals: the board's shared draws)"))


def _reliability(context: Context, name: str, document: dict[str, Any]) -> Any:
    """The model's reliability curve; None without an answers cache (or without a task it covers); PENDING while
    it is computed in the background (reading the tasks' data takes up to a minute on a fresh start); or the
    exception computing it raised."""
    from jevserve.web.calibration import cache_files

    answers_dir = context.settings.answers_dir
    if answers_dir is None or not cache_files(answers_dir, name):
        return None

    def compute() -> Any:
        from jevserve.bench import TASKS
        from jevserve.bench.pipeline import load_tasks
        from jevserve.web.calibration import reliability

        tasks = [TASKS[t] for t, r in document["tasks"].items() if t in TASKS and r.get("brier") is not None]
        loaded, _ = load_tasks(tasks, context.data(), log=lambda _: None, everyday=False)
        return reliability(answers_dir, name, loaded)

    return context.when_ready(f"reliability:{name}:{document['date']}", compute)
