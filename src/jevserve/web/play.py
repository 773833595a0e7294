"""The playground: start a round, answer its five items, see each reveal, and the people-vs-model page.

    POST /play/rounds                      → 303 to the round (a new round for this session)
    GET  /play/rounds/{id}                 the current item, or the round's summary once all five are answered
    POST /play/rounds/{id}/answer          position + choice → stored once (a repeat changes nothing), the served
                                           model asked and its answer stored → 303 reveal
    GET  /play/rounds/{id}/reveal/{pos}    the truth, the served model's and the board rows' answers, the times

A round belongs to the session that started it; any other id (unknown, tampered, someone else's) is a 404.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from jevserve.web.answering import StoredRow, ask_model, cached_probabilities, stored_choice
from jevserve.web.context import (
    HEAD_SCOPE_KEY,
    Context,
    PageError,
    keep_session,
    read_form,
    retry_after,
    session_id,
    start_session,
)
from jevserve.web.decisions import DECISIONS, Pools, draw_round
from jevserve.web.humans import counted, expected_accuracy, versus
from jevserve.web.store import ModelAnswer, Round

log = logging.getLogger("jevserve.web")
_ROUND_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
POOLS_RETRY_S = 15  # what a visitor who starts a round while the item pools load is told to wait


def _round(context: Context, request: Request, round_id: str) -> Round:
    found = context.store.get_round(round_id) if _ROUND_ID.match(round_id) else None
    session = session_id(request, context.session_key)
    if found is None or session is None or found.session_id != session:
        raise PageError(404, f"no round {round_id[:80]!r} in this session; start one at /play")
    return found


def _position(value: str, round_: Round) -> int:
    # ASCII digits only: str.isdigit() also accepts "²", which int() refuses (a 500); and few of them: int() refuses
    # over 4,300 digits (a 500 too), and no round is that long
    if not (value.isascii() and value.isdigit() and len(value) <= 6) or int(value) >= len(round_.items):
        last = len(round_.items) - 1
        raise PageError(400, f"position {value[:20]!r} is not an item of this round; expected 0–{last}")
    return int(value)


def _ready_pools(context: Context) -> Pools:
    """The item pools, or a 503 with Retry-After while they are read after a start (tens of seconds to minutes, in
    the background): a round's item page reloaded just after a restart waited three minutes for them."""
    pools = context.pools_if_ready()
    if pools is None:
        raise PageError(503, "the playground's items are still being read after the site started (a minute or two); "
                             f"try again in {POOLS_RETRY_S} seconds", headers={"Retry-After": str(POOLS_RETRY_S)})
    return pools


def _served_answer(
    context: Context, round_: Round, position: int, retry: str = "reload to retry"
) -> ModelAnswer | None:
    """The served model's stored answer, asking it first when not yet stored (503 when it cannot be reached, saying
    `retry`)."""
    decider = context.settings.decider
    if decider is None:
        return None
    stored = context.store.model_answer(round_.round_id, position, round_.model)
    if stored is not None:
        return stored
    item = round_.items[position]
    pool_item = _ready_pools(context).get(item.decision, item.item_id)
    try:
        answer = ask_model(decider, DECISIONS[item.decision], pool_item, context.site.get().stored,
                           row_name=context.settings.board_names.get(decider.name))
    except Exception as exc:  # a remote endpoint that is down or refuses: the page says so, the round goes on
        # the why (an internal URL, a library's message) is the host's, in the log; the visitor is told what to do
        log.warning("the playground's decision model %s did not answer: %s", decider.name, exc)
        raise PageError(503, f"the decision model did not answer; {retry}") from exc
    context.store.record_model_answer(round_.round_id, position, answer)
    return context.store.model_answer(round_.round_id, position, round_.model)


def _on_board(context: Context) -> list[StoredRow]:
    """The board rows' stored answers on the tasks where the board shows their cell: a task a row ran on other test
    items than the reference row's (an older data version) is left out of its row here too."""
    cells = {r.model: r.tasks for r in context.site.board().rows}
    return [replace(r, values={t: v for t, v in r.values.items() if t in cells.get(r.model, {})})
            for r in context.site.get().stored]


def _levels(decision: Any) -> dict[str, str]:
    """For a score question (reply length), level index → its description; {} otherwise."""
    from jevserve.bench import TASKS

    task = TASKS[decision.task]
    question = task.questions[task.primary]
    return {str(i): text for i, text in enumerate(question["criteria"])} if question["type"] == "score" else {}


def register(app: FastAPI, context: Context) -> None:
    """Add the playground's routes."""

    @app.get("/play", response_class=HTMLResponse)
    def play_page(request: Request) -> HTMLResponse:
        decider = context.settings.decider
        # loading starts here if not yet; the page says so rather than a round start being the first to tell
        ready = context.pools_if_ready() is not None
        # outside a checkout the packaged board cannot score answers (it has no item labels): no people row to join
        scored = bool(context.site.get().refs)
        return context.render(request, "play.html", decisions=DECISIONS.values(),
                              model=decider.name if decider else None, ready=ready, scored=scored)

    @app.post("/play/rounds")
    async def start_round(request: Request) -> RedirectResponse:
        await read_form(request)
        # loading the pools takes tens of seconds on a fresh start (in the background, started here if not yet):
        # the visitor is told to come back rather than left waiting on a spinning tab for up to a minute; asked
        # before the round limit, so that a start refused for it is not counted as a round started
        pools = _ready_pools(context)
        address = request.client.host if request.client else "-"
        wait_s = context.round_limit.admit(address)
        if wait_s is not None:
            limit = context.round_limit
            raise PageError(429, f"this address has started {limit.limit} rounds in the last "
                                 f"{limit.window_s / 60:g} minutes, the most one address may; try again in "
                                 f"{max(1, round(wait_s / 60))} minute{'s' if round(wait_s / 60) > 1 else ''}",
                            headers=retry_after(wait_s))
        seed = secrets.randbits(63)
        round_id = secrets.token_urlsafe(16)
        model = context.settings.decider.name if context.settings.decider else "-"
        session, fresh = start_session(request, context.session_key)
        context.store.create_round(round_id, session, seed, model, draw_round(pools, seed))
        response = RedirectResponse(f"/play/rounds/{round_id}", status_code=303)
        return keep_session(response, session) if fresh else response

    @app.get("/play/rounds/{round_id}", response_class=HTMLResponse)
    def round_page(request: Request, round_id: str, unanswered: str = "") -> HTMLResponse:
        round_ = _round(context, request, round_id)
        position = round_.next_position
        if position is None:
            return context.render(request, "summary.html", round=round_, decisions=DECISIONS,
                                  answers=[context.store.model_answer(round_id, i.position, round_.model)
                                           for i in round_.items])
        item = round_.items[position]
        pool_item = _ready_pools(context).get(item.decision, item.item_id)
        if pool_item is None:
            raise PageError(410, f"item {item.item_id} is no longer in the {item.decision} pool (data changed)")
        if not request.scope.get(HEAD_SCOPE_KEY):  # a HEAD (a link checker) shows nobody the item: no clock yet
            context.store.mark_shown(round_id, position)
        return context.render(request, "item.html", round=round_, position=position, item=pool_item,
                              decision=DECISIONS[item.decision],
                              # an answer-less submit follows a showing: on a first one the link is no submit's
                              unanswered=unanswered == str(position) and item.shown_at is not None)

    @app.post("/play/rounds/{round_id}/answer")
    async def answer(request: Request, round_id: str) -> RedirectResponse:
        form = await read_form(request)
        round_ = _round(context, request, round_id)
        position = _position(form.get("position", ""), round_)
        item = round_.items[position]
        decision = DECISIONS[item.decision]
        if item.choice is None and round_.next_position != position:
            raise PageError(409, f"item {position + 1} is not the current one; answer item "
                                 f"{round_.next_position + 1} first")
        choice = form.get("choice", "")
        if not choice and item.choice is None:  # Answer pressed before a choice: the same item, asked again
            return RedirectResponse(f"/play/rounds/{round_id}?unanswered={position}", status_code=303)
        if not choice:  # the item's page again (Back), Answer pressed with nothing chosen: its answer stands
            return RedirectResponse(f"/play/rounds/{round_id}/reveal/{position}", status_code=303)
        if choice not in dict(decision.options):
            raise PageError(400, f"choice {choice[:40]!r} is not an answer to this item; expected one of: "
                                 f"{', '.join(v for v, _ in decision.options)}")
        if item.choice is None:
            if item.shown_at is None:
                raise PageError(409, "this item was never shown; open the round page first")
            # 503 at once while the pools are read after a start, as the round page and the reveal answer: the answer
            # waited 74 s for them (and its time counted the wait); unstored, the item stays open to answer again
            pool_item = _ready_pools(context).get(item.decision, item.item_id)
            if pool_item is None:
                raise PageError(410, f"item {item.item_id} is no longer in the {item.decision} pool")
            time_ms = max(0.0, (time.time() - item.shown_at) * 1000.0)
            stored = context.store.record_answer(round_id, position, choice, pool_item.truth,
                                                 choice == pool_item.truth, time_ms)
        else:
            stored = False
        reveal_url = f"/play/rounds/{round_id}/reveal/{position}"
        if not stored:
            # Answered first elsewhere (another tab, or a concurrent submit): the first answer stands, and when this
            # one differs the reveal says so instead of judging an answer this tab never gave.
            first = context.store.get_round(round_id).items[position].choice
            if first != choice:
                reveal_url += f"?not_stored={quote(choice)}"
        # The served model is asked as soon as the answer is stored, so its answer is there whether or not the
        # redirect is followed; when it cannot be reached, the reveal page asks again.
        await run_in_threadpool(_served_answer, context, round_, position,
                                f"your answer is stored; open {reveal_url} for the right answer (it asks the "
                                "model again)")
        return RedirectResponse(reveal_url, status_code=303)

    @app.get("/play/rounds/{round_id}/reveal/{position}", response_class=HTMLResponse)
    def reveal(request: Request, round_id: str, position: str, not_stored: str = "") -> HTMLResponse:
        round_ = _round(context, request, round_id)
        index = _position(position, round_)
        item = round_.items[index]
        if item.choice is None:
            raise PageError(409, f"item {index + 1} is not answered yet; answer it at /play/rounds/{round_id}")
        decision = DECISIONS[item.decision]
        pool_item = _ready_pools(context).get(item.decision, item.item_id)
        # the truth and the person's answer do not depend on the served model: a model that is down only leaves
        # its own row out, with a sentence saying so
        try:
            served, served_error = _served_answer(context, round_, index), None
        except PageError as exc:
            served, served_error = None, str(exc.detail)
        # the served model's names: the one it is served under, and the one its results are filed under
        served_as = {round_.model, context.settings.board_names.get(round_.model)}
        others: list[dict[str, Any]] = [
            {"model": r.model, "kind": r.kind, "choice": stored_choice(r, decision, item.item_id),
             "probabilities": cached_probabilities(context.cached_answers(r.model), r.model, decision, pool_item)
             if pool_item and r.kind == "model" else {}}
            for r in _on_board(context) if r.model not in served_as and decision.task in r.values
        ]
        # the served answer's rule, shown beside it: a "yes" at P(yes) 0.49 reads as a bug unless its threshold shows
        own = next((r for r in context.site.get().stored if r.model in served_as), None)
        rule = own.rules.get(decision.task) if own else None
        threshold = None if decision.key == "length" else (
            (float(rule["threshold"]), int(rule["direction"])) if rule else (0.5, 1))
        return context.render(request, "reveal.html", round=round_, item=item, pool_item=pool_item,
                              decision=decision, served=served, served_error=served_error, others=others,
                              threshold=threshold, min_answer_s=context.settings.min_answer_ms / 1000.0,
                              levels=_levels(decision), next_position=round_.next_position,
                              not_stored=not_stored if not_stored in dict(decision.options) and
                              not_stored != item.choice else None)

    @app.get("/people", response_class=HTMLResponse)
    def people_page(request: Request) -> HTMLResponse:
        answers, left_out = counted(context.store.answer_rows(), context.settings.min_answer_ms)
        rows = versus(answers)
        decider = context.settings.decider
        pools = context.pools_if_ready()  # loading them takes tens of seconds: the page does not wait for it
        expected = None if pools is None else expected_accuracy(pools, _on_board(context))
        return context.render(request, "people.html", rows=rows, decisions=DECISIONS,
                              model=decider.name if decider else None, expected=expected, left_out=left_out,
                              min_answer_s=context.settings.min_answer_ms / 1000.0,
                              max_rounds=context.settings.max_rounds,
                              window_min=context.settings.rounds_window_s / 60.0)
