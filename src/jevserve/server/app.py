"""The HTTP app: `POST /v1/systemone`, `GET /v1/models`, `GET /healthz`, `GET /metrics`.

The decision route reads and validates the body itself (rather than through FastAPI's body parameter) so that the
contract's error shapes are exact and the per-request overhead stays small. Order of checks: auth, media type and
size, JSON + schema (422), model name (404), question and option caps (413), context budget (413), queue room
(429), then the batcher. A backend's probabilities are checked before an answer is built: a vector that is not a
distribution is a 500 with its cause logged (502 from a remote backend), never a repaired answer.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from jevserve.decide.base import DecisionBackend, DecisionItem, Decisions, InputTooLongError
from jevserve.decide.batcher import DEFAULT_MAX_CHUNK_MS, Batcher
from jevserve.protocol import (
    MAX_OPTIONS,
    AuthenticationError,
    InvalidProbabilitiesError,
    PayloadTooLargeError,
    Question,
    SystemOneError,
    SystemOneRequest,
    UnknownModelError,
    build_answer,
    error_body,
    parse_request,
    render_text,
    to_decision,
    validation_body,
)
from jevserve.protocol.body import BODY_TIMEOUT_S
from jevserve.server.body import DEFAULT_MAX_BODY_BYTES, read_body
from jevserve.server.defaults import DEFAULT_MAX_OPTIONS, DEFAULT_MAX_QUESTIONS, max_request_questions
from jevserve.server.metrics import ServerMetrics

LATEST_ALIAS = "jev-latest"
# how long a model listing asked right at start waits for forwarded models' cards (their listing's own timeout is
# 3 s, decide.remote.CARD_TIMEOUT_S; a hung upstream then leaves the date unknown, never the listing unanswered)
CARD_WAIT_S = 5.0
ROUTE = "/v1/systemone"

log = logging.getLogger("jevserve.server")


@dataclass(frozen=True)
class ServerSettings:
    """Limits and auth of one server."""

    api_key: str | None = None  # bearer key; None serves without auth
    max_batch: int = 64  # questions per forward batch
    max_queue: int = 2048  # questions waiting before 429
    # 429 when work is queued before a request and its answer is estimated to come later than this (None: off)
    answer_within_s: float | None = None
    max_wait_ms: float = 2.0  # longest wait for requests already arriving before a batch starts
    # a batch holds what the backend answers in about this time (None: max_batch)
    max_chunk_ms: float | None = DEFAULT_MAX_CHUNK_MS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    body_timeout_s: float = BODY_TIMEOUT_S  # the whole request body must arrive within this (408 after)
    max_questions: int = DEFAULT_MAX_QUESTIONS  # questions per request (413 above)
    max_options: int = DEFAULT_MAX_OPTIONS  # options per request, all questions together (413 above)

    def limits(self) -> dict[str, int]:
        """The per-request limits a client can read from `GET /v1/models` (`x_limits`)."""
        return {
            "max_questions": self.max_questions,
            "max_options": self.max_options,
            "max_body_bytes": self.max_body_bytes,
            "max_batch": self.max_batch,
        }


@dataclass
class ServedModel:
    """A backend and its batcher under a model name."""

    backend: DecisionBackend
    batcher: Batcher


@dataclass
class ServerState:
    """Everything the routes share."""

    settings: ServerSettings
    models: dict[str, ServedModel]
    default_name: str
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
    num_arriving: int = 0
    aliases: dict[str, str] = field(default_factory=dict)  # a model's other name → its concrete name
    learning: list[asyncio.Task] = field(default_factory=list)  # forwarded models' cards, learnt at start

    def resolve(self, name: str) -> tuple[str, ServedModel]:
        """Map a requested model name (or an alias) to the served model, or raise UnknownModelError."""
        concrete = self.default_name if name == LATEST_ALIAS else self.aliases.get(name, name)
        served = self.models.get(concrete)
        if served is None:
            known = ", ".join([LATEST_ALIAS, *self.models, *self.aliases])
            raise UnknownModelError(f"unknown model {name!r}; this server serves: {known}")
        return concrete, served


def _encode(payload: Any) -> bytes:
    # allow_nan=False: a NaN must fail loudly here rather than reach a client as invalid JSON.
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _json(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = payload if isinstance(payload, bytes) else _encode(payload)
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _error(state: ServerState, exc: SystemOneError, request_id: str | None = None) -> Response:
    state.metrics.errors.labels(error_type=exc.error_type).inc()
    headers = dict(exc.headers or {}) | ({REQUEST_ID: request_id} if request_id else {})
    return _json(exc.body(), exc.status_code, headers)


# the paths served, by the route name /metrics counts their requests under (`jevserve_requests_total{route}`); an
# error answer on any other path is counted under "unmatched"
COUNTED_ROUTES = {ROUTE: ROUTE, ROUTE + "/": ROUTE, **{path: path for path in ("/v1/models", "/healthz", "/metrics")}}


def _check_auth(state: ServerState, request: Request) -> None:
    key = state.settings.api_key
    if key is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header.strip():
        raise AuthenticationError("missing API key: send 'Authorization: Bearer <key>'")
    if scheme.lower() == "bearer" and not token.strip():  # `Bearer "$KEY"` with KEY unset in the sender's shell
        raise AuthenticationError("empty API key: the Authorization header is 'Bearer' with no key after it (a key "
                                  "taken from an environment variable that is not set where the request was sent?)")
    if scheme.lower() != "bearer" or not token.strip():  # a key sent without its scheme is there, just malformed
        raise AuthenticationError("malformed Authorization header: send 'Authorization: Bearer <key>'")
    if not hmac.compare_digest(token.strip().encode(), key.encode()):
        raise AuthenticationError("invalid API key")


async def _until_disconnect(request: Request) -> None:
    # After the body has been read, the next ASGI message is the client's disconnect (if it ever comes).
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _name_too_long(
    backend: DecisionBackend, parsed: SystemOneRequest, items: list[DecisionItem], exc: InputTooLongError
) -> str:
    """The backend's too-long message with the first question it names (checked one by one, on this error path only,
    so a client with many questions learns which to shorten)."""
    if str(exc).startswith("state "):  # the state is every question's: no question to name
        return str(exc)
    for qid, item in zip(parsed.questions, items, strict=True):
        try:
            backend.check([item])
        except InputTooLongError:
            return f"question {qid!r}: {exc}"
    return str(exc)  # the state itself, shared by every question


def _check_caps(settings: ServerSettings, questions: Sequence[Question]) -> None:
    if len(questions) > settings.max_questions:
        # the flag that set the limit: half of --max-queue caps --max-questions (a client told the wrong one asked its
        # operator to raise a flag that changes nothing)
        flag = ("--max-questions" if settings.max_questions < max_request_questions(settings.max_queue)
                else f"--max-questions, at most half of --max-queue {settings.max_queue}")
        raise PayloadTooLargeError(
            f"request has {len(questions)} questions; this server accepts at most {settings.max_questions} per request "
            f"({flag}); split it into several requests"
        )
    counts = [2 if q.type == "noul" else len(q.criteria) for q in questions]
    if max(counts, default=0) > settings.max_options:  # no split helps a question alone over the limit
        raise PayloadTooLargeError(
            f"a question has {max(counts)} options; this server accepts at most {settings.max_options} per request "
            f"(--max-options), under the contract's {MAX_OPTIONS} a question may have: ask for fewer options, or ask "
            "its operator to raise --max-options"
        )
    if sum(counts) > settings.max_options:
        raise PayloadTooLargeError(
            f"request has {sum(counts)} options over its questions; this server accepts at most "
            f"{settings.max_options} per request (--max-options); split it into several requests"
        )


REQUEST_ID = "x-typesafe-request-id"
OFFLOAD_BYTES = 64 * 1024  # bodies larger than this are parsed and answered off the event loop


async def _maybe_thread(offload: bool, fn: Any, *args: Any) -> Any:
    return await asyncio.to_thread(fn, *args) if offload else fn(*args)


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


async def _answer_or_disconnect(request: Request, work: asyncio.Future) -> Any:
    watcher = asyncio.ensure_future(_until_disconnect(request))
    done, _ = await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
    if work in done:
        watcher.cancel()
        return work.result()
    work.cancel()
    raise ClientGone


def create_app(backends: Sequence[DecisionBackend], settings: ServerSettings | None = None) -> FastAPI:
    """Build the app serving `backends`; the first one answers the `jev-latest` alias."""
    if not backends:
        raise ValueError("create_app needs at least one backend")
    settings = settings or ServerSettings()
    metrics = ServerMetrics()
    state = ServerState(settings=settings, models={}, default_name=backends[0].card.name, metrics=metrics)
    for backend in backends:
        name = backend.card.name
        if name in state.models or name in state.aliases or name == LATEST_ALIAS:
            raise ValueError(f"model name {name!r} is served twice or collides with an alias")
        for alias in backend.card.aliases:
            if alias in state.models or alias in state.aliases or alias == LATEST_ALIAS:
                raise ValueError(f"alias {alias!r} of {name!r} is served twice or collides with a model name")
            state.aliases[alias] = name
        batcher = Batcher(
            backend,
            max_batch=settings.max_batch,
            max_wait_ms=settings.max_wait_ms,
            max_queue=settings.max_queue,
            answer_within_s=settings.answer_within_s,
            max_chunk_ms=settings.max_chunk_ms,
            on_batch=metrics.batch_observer(name),
            arriving=lambda: state.num_arriving,
        )
        metrics.watch_queue(name, lambda b=batcher: b.queue_depth, lambda b=batcher: b.running)
        state.models[name] = ServedModel(backend, batcher)

    async def learn_card(served: ServedModel) -> None:
        problem = await served.backend.learn_card()
        if problem is not None:
            failing = getattr(served.backend, "upstream_problem", None)
            log.warning("%s: %s at start, so /v1/models gives no release date for it %s",
                        served.backend.card.name, problem,
                        "until the upstream answers and lists it; every request to it fails until then (GET "
                        "/healthz says so)"
                        if failing else "until a restart")

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # A forwarded model's card is its upstream's, learnt in the background: waited for here, a hung upstream
        # delayed the start by the listing's timeout, and a first request sent once "serving" was printed got its
        # 504 that much after the proxy's deadline.
        state.learning = [asyncio.create_task(learn_card(served)) for served in state.models.values()
                          if getattr(served.backend, "learn_card", None) is not None]
        for served in state.models.values():
            served.batcher.start()
        yield
        for task in state.learning:
            task.cancel()
        for served in state.models.values():
            await served.batcher.close()

    # no /openapi.json: the routes read raw bodies, so FastAPI's schema of them was empty; the contract is the schema
    app = FastAPI(
        title="jevserve System One server", lifespan=lifespan, redirect_slashes=False, docs_url=None, redoc_url=None,
        openapi_url=None,
    )
    app.state.jevserve = state

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        error_type = "not_found" if exc.status_code == 404 else "api_usage_error"
        metrics.errors.labels(error_type=error_type).inc()
        # every error answer is a request too: one to a path served (with a method it lacks) under that route, one to
        # no route under "unmatched", a bounded label whatever paths clients try
        metrics.requests.labels(route=COUNTED_ROUTES.get(request.url.path, "unmatched"),
                                status=str(exc.status_code)).inc()
        if exc.status_code == 405:  # the route is there; the method is wrong (Starlette's Allow header names the right)
            allowed = (getattr(exc, "headers", None) or {}).get("Allow", "")
            message = f"{request.url.path} does not take {request.method}" + (f"; send {allowed}" if allowed else "")
        elif exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        else:
            message = str(exc.detail)
        return _json(error_body(error_type, message), exc.status_code, getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        log.error("500 on %s %s", request.method, request.url.path, exc_info=exc)
        metrics.errors.labels(error_type="internal_error").inc()
        if request.url.path == ROUTE:  # every answer of the route is counted with its status, a 500 too
            metrics.requests.labels(route=ROUTE, status="500").inc()
        return _json(error_body("internal_error", f"internal error: {type(exc).__name__}"), 500)

    def client_left(where: str) -> Response:
        # The client closed the connection: nobody reads this answer; count it and log it as nginx's 499.
        metrics.disconnects.inc()
        metrics.requests.labels(route=ROUTE, status="499").inc()
        log.info("499 POST %s: client disconnected %s", ROUTE, where)
        return Response(status_code=499)

    def prepare(body: bytes) -> tuple[SystemOneRequest, str, ServedModel, list[DecisionItem]]:
        # Parse and check a body: ValidationError (422) or SystemOneError (404, 413) for bad input.
        parsed = parse_request(body)
        name, served = state.resolve(parsed.model)
        _check_caps(settings, list(parsed.questions.values()))
        # Refuse (429) before the work of preparing the items; advisory when run in a worker thread (it only reads
        # the queue), and checked again on the event loop when the items are submitted.
        served.batcher.check_room(len(parsed.questions))
        state_text = render_text(parsed.state)
        items = [DecisionItem(state_text, to_decision(q)) for q in parsed.questions.values()]
        try:
            served.backend.check(items)
        except InputTooLongError as exc:
            raise PayloadTooLargeError(_name_too_long(served.backend, parsed, items, exc)) from exc
        return parsed, name, served, items

    def finish(
        parsed: SystemOneRequest, name: str, served: ServedModel, items: list[DecisionItem], decided: Decisions
    ) -> bytes:
        # The encoded 200 payload; InvalidProbabilitiesError when the backend's vectors are not distributions.
        answers = {}
        for (qid, question), probs in zip(parsed.questions.items(), decided.probabilities, strict=True):
            try:
                answers[qid] = build_answer(question, probs)
            except InvalidProbabilitiesError as exc:
                raise InvalidProbabilitiesError(f"question {qid!r}: {exc}") from exc
        tokens = decided.input_tokens
        if tokens is None:
            tokens = served.backend.count_tokens(items)
        usage = {"input_tokens": int(tokens), "output_tokens": 0}
        payload = _encode({"model": name, "answers": answers, "usage": usage})
        for question in parsed.questions.values():  # counted once the answer exists (a failure answers none)
            metrics.questions.labels(type=question.type).inc()
        return payload

    async def systemone(request: Request) -> Response:
        started = time.perf_counter()
        # every answer of the route carries an id, errors too, so a client can quote it (the SDK reads it)
        request_id = uuid.uuid4().hex
        tagged = {REQUEST_ID: request_id}
        state.num_arriving += 1
        submitted = False
        try:
            _check_auth(state, request)
            try:
                body = await read_body(request, settings.max_body_bytes, settings.body_timeout_s)
            except ClientDisconnect:
                return client_left("while sending its body")
            # A large body is parsed, and its answer built, in a worker thread: the event loop keeps reading and
            # answering small requests meanwhile (parsing 3,000 questions takes ~100 ms of pure Python).
            offload = len(body) > OFFLOAD_BYTES
            try:
                parsed, name, served, items = await _maybe_thread(offload, prepare, body)
            except ValidationError as exc:
                metrics.errors.labels(error_type="validation_error").inc()
                metrics.requests.labels(route=ROUTE, status="422").inc()
                errors = exc.errors(include_url=False, include_context=False, include_input=False)
                return _json(validation_body(errors), 422, tagged)
            state.num_arriving -= 1
            submitted = True
            work = asyncio.ensure_future(served.batcher.decide(items))
            try:
                decided = await _answer_or_disconnect(request, work)
            except ClientGone:
                return client_left("while its questions were queued or running")
            try:
                payload = await _maybe_thread(offload, finish, parsed, name, served, items, decided)
            except InvalidProbabilitiesError as exc:
                log.error("model %s returned an invalid answer: %s", name, exc)
                metrics.errors.labels(error_type="internal_error").inc()
                metrics.requests.labels(route=ROUTE, status="500").inc()
                message = f"internal error: model {name} returned an invalid probability vector ({exc})"
                return _json(error_body("internal_error", message), 500, tagged)
            metrics.requests.labels(route=ROUTE, status="200").inc()
            metrics.latency.observe(time.perf_counter() - started)
            return _json(payload, headers=tagged)
        except SystemOneError as exc:
            metrics.requests.labels(route=ROUTE, status=str(exc.status_code)).inc()
            return _error(state, exc, request_id)
        finally:
            if not submitted:
                state.num_arriving -= 1

    app.add_api_route(ROUTE, systemone, methods=["POST"], include_in_schema=True)
    app.add_api_route(ROUTE + "/", systemone, methods=["POST"], include_in_schema=False)

    async def list_models(request: Request) -> Response:
        try:
            _check_auth(state, request)
        except SystemOneError as exc:
            return _error(state, exc)
        pending = [task for task in state.learning if not task.done()]
        if pending:  # a listing asked right at start waits for the cards being learnt (each bounded by its timeout)
            await asyncio.wait(pending, timeout=CARD_WAIT_S)
        default = state.models[state.default_name].backend.card
        entries = [
            {
                "name": LATEST_ALIAS,
                "description": f"alias of {default.name}: {default.description}",
                "release_date": default.release_date,
            }
        ]
        for served in state.models.values():
            card = served.backend.card
            entries.append({"name": card.name, "description": card.description, "release_date": card.release_date})
            entries += [
                {"name": alias, "description": f"alias of {card.name}", "release_date": card.release_date}
                for alias in card.aliases
            ]
        metrics.requests.labels(route="/v1/models", status="200").inc()
        return _json({"models": entries, "x_limits": settings.limits()})

    app.add_api_route("/v1/models", list_models, methods=["GET", "HEAD"])

    async def healthz() -> Response:
        # A forwarded model whose last exchange with its upstream failed (a refused key, no answer) serves nothing:
        # 503 names why, so a load balancer stops sending and a person sees the cause; the next success clears it.
        upstream = {}
        for name, served in state.models.items():
            recheck = getattr(served.backend, "recheck", None)  # a failing upstream is asked again (rate-limited)
            problem = await recheck() if recheck is not None else None
            if problem:
                upstream[name] = problem
        return _json(
            {
                "status": "upstream_failing" if upstream else "ok",
                "models": list(state.models),
                "queue_depth": {name: served.batcher.queue_depth for name, served in state.models.items()},
                # a model computing a long batch has nothing queued: what it is answering says it is busy
                "running": {name: served.batcher.running for name, served in state.models.items()},
                **({"upstream_problems": upstream} if upstream else {}),
            },
            503 if upstream else 200,
        )

    app.add_api_route("/healthz", healthz, methods=["GET", "HEAD"])  # HEAD: what many load balancers' probes send

    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    app.add_api_route("/metrics", prometheus, methods=["GET", "HEAD"])
    return app
