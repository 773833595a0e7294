"""A backend that forwards decisions to another System One endpoint (hosted models, other servers).

Each client request becomes one upstream request per distinct state, with ids that carry no meaning (`q0`, `q1`,
…), sent concurrently over a pooled async connection (`concurrent = True`: the batcher does not queue them). At
most `max_in_flight` upstream requests run at once; the whole request, waiting for a slot included, has one
deadline, `timeout_s` (default 8 s, below the SDK's 10 s, so a client never retries a request the proxy is still
working on). The proxy does not retry: the client's SDK already does, and two retry loops would multiply.

What the client sees for what the upstream did (`upstream_error`):

    200 with a valid answer      200; usage.input_tokens is the upstream's count
    200 with an invalid answer   502 naming the fault (bad JSON, missing question, wrong option keys, NaN, ...)
    an answer over 16 MiB        502, read no further
    429                          429 with the upstream's Retry-After (the client's own retries wait for it)
    401, 403                     502 "upstream refused this server's key" (the client's key was fine)
    404                          502 "upstream does not serve model ..." (a --remote-model problem)
    other 4xx                    the same status: the upstream refused the client's input
    5xx, 408                     502 with the upstream's message
    3xx                          502 naming where it redirects (POST /v1/systemone is never redirected)
    no answer before timeout_s   504 with Retry-After: timeout_s (a busy upstream is the likeliest cause)
    over half of timeout_s       429 overloaded_error with Retry-After: timeout_s, the request not sent: this
      spent waiting for one of     proxy's own load, and the upstream would have too little time left
      max_in_flight slots
    connection refused or reset  502
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import math
import time
import zlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx
import numpy as np
from pydantic import ValidationError

from jevserve import __version__
from jevserve.client import DEFAULT_TIMEOUT_S, retry_after_s
from jevserve.decide.base import DecisionBackend, DecisionItem, Decisions, ModelCard
from jevserve.decide.batcher import MAX_RETRY_AFTER_S as BATCHER_MAX_RETRY_AFTER_S
from jevserve.protocol import (
    BackendError,
    DecisionQuestion,
    NoulQuestion,
    OverloadedError,
    SystemOneError,
    to_decision,
    to_wire,
)
from jevserve.protocol.answers import (
    ChoiceAnswer,
    InvalidProbabilitiesError,
    NoulAnswer,
    ScoreAnswer,
    SystemOneResponse,
    normalise,
)
from jevserve.protocol.errors import retry_after_headers
from jevserve.protocol.text import is_iso_date

DEFAULT_REMOTE_TIMEOUT_S = 8.0  # below the SDK's DEFAULT_TIMEOUT_S, so the client does not give up first
DEFAULT_MAX_IN_FLIGHT = 32
MAX_QUEUED_SHARE = 0.5  # past this share of its deadline in the proxy's queue, a request is not sent (429)
POOL_KEEPALIVE_S = 4.0  # below uvicorn's 5 s timeout_keep_alive (see _async_client)
CARD_TIMEOUT_S = 3.0  # how long a starting server waits for the upstream's model listing
RECHECK_S = 5.0  # how often /healthz may ask a failing upstream again
UNKNOWN_RELEASE_DATE = "1970-01-01"  # what the card says until the upstream's listing gives the date
assert DEFAULT_REMOTE_TIMEOUT_S < DEFAULT_TIMEOUT_S


class UpstreamRejected(SystemOneError):
    """The upstream endpoint refused the client's input (a 4xx other than auth, model, 408 and 429): same status."""


class UpstreamTimeout(BackendError):
    """The upstream did not answer within the proxy's deadline. A busy upstream is the likeliest cause, so the client
    is told to wait one deadline before it retries (by then every request now in the upstream has ended here, one
    way or the other); without a hint the SDK retried after half a second, into the same queue."""

    status_code = 504

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message, headers=retry_after_headers(retry_after_s))


def probabilities_from_answer(
    question: DecisionQuestion, answer: NoulAnswer | ChoiceAnswer | ScoreAnswer
) -> np.ndarray:
    """Read an upstream answer back into one probability per option, in option order; raise if it does not fit.

    Raises InvalidProbabilitiesError for an answer of another type, option keys that are not exactly the question's
    (a different case included), or values that are not a probability distribution.
    """
    expected_type = {"noul": NoulAnswer, "choice": ChoiceAnswer, "score": ScoreAnswer}[question.kind]
    if not isinstance(answer, expected_type):
        raise InvalidProbabilitiesError(f"a {answer.type} answer to a {question.kind} question")
    if isinstance(answer, NoulAnswer):
        p = answer.noul
        if not (math.isfinite(p) and 0.0 <= p <= 1.0):
            raise InvalidProbabilitiesError(f"noul must be a probability in [0, 1]; got {p!r}")
        return np.array([p, 1.0 - p])
    keys = (
        [o.label for o in question.options]
        if isinstance(answer, ChoiceAnswer)
        else [str(i) for i in range(question.num_options)]
    )
    if set(answer.probabilities) != set(keys):
        raise InvalidProbabilitiesError(
            f"probability keys {sorted(answer.probabilities)[:8]} are not the options {keys[:8]}"
        )
    return np.array(normalise([answer.probabilities[k] for k in keys], len(keys)))


def _upstream_message(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text.strip()[:300] or "(empty body)"
    if isinstance(detail, dict):
        return str(detail.get("message", detail))[:300]
    if detail is None:  # a body with no `detail` (`{}`): what it holds, not "None"
        return response.text.strip()[:300] or "(empty body)"
    return str(detail)[:300]


# what recheck() asks a failing upstream: one yes/no question about a short text, as any client might
PROBE = DecisionItem("The proxy asks whether its upstream answers.", to_decision(NoulQuestion(type="noul")))
# The longest upstream Retry-After passed on to clients: the server's own bound (typesafe-sdk gives up at once on a
# hint of 30 s or more), so a client told to wait does; told 600 s, as it was, an SDK client failed at once
MAX_RETRY_AFTER_S = BATCHER_MAX_RETRY_AFTER_S
# The largest upstream answer read: the contract's bound on a response body (a client drops a longer one). Read
# unbounded, one upstream sending 200 MB grew the proxy by 200 MB, once per request in flight.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
KEY_REFUSED = "refused this server's key"  # in the message of a 401/403 from the upstream (callers look for it)


class FairSlots:
    """At most `size` upstream requests in flight, shared among the calls that want them: a freed slot is handed to
    one waiting request of the call that holds fewest, so a call that arrives beside a big one waits for one
    request to end, not for the big one's turn. Work-conserving: no slot stays free while a request waits, so a
    call alone uses them all. With one shared semaphore a call of 310 texts (one agent step's tool results) held
    every slot and ordinary calls beside it waited past their deadline (an outside tester's), and with a fixed
    quarter each, four such calls still did; waking every waiter at each change cost a call of 2,000 texts the
    square of that, and a share cap left slots idle. The bookkeeping is synchronous (one event loop), so a cancelled
    request never leaves a slot counted as taken."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.in_flight = 0
        self._held: dict[object, int] = {}  # per call: its requests in flight
        self._queues: dict[object, collections.deque[asyncio.Future]] = {}  # per call: its requests waiting

    def _take(self, call: object) -> None:
        self._held[call] = self._held.get(call, 0) + 1
        self.in_flight += 1

    def _give_back(self, call: object) -> None:
        self.in_flight -= 1
        self._held[call] -= 1
        if not self._held[call]:
            del self._held[call]
        self._hand_on()

    def _hand_on(self) -> None:
        """Hand free slots to waiting requests, each to the waiting call that holds fewest."""
        while self.in_flight < self.size and self._queues:
            call = min(self._queues, key=lambda c: self._held.get(c, 0))
            queue = self._queues[call]
            waiter = queue.popleft()
            if not queue:
                del self._queues[call]
            if waiter.done():  # its request was cancelled while it waited
                continue
            self._take(call)
            waiter.set_result(None)

    @contextlib.asynccontextmanager
    async def slot(self, call: object) -> AsyncIterator[None]:
        """Hold one slot for `call` while the block runs."""
        if not self._queues and self.in_flight < self.size:
            self._take(call)
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._queues.setdefault(call, collections.deque()).append(waiter)
            try:
                await waiter  # the slot is taken on this request's behalf before it is woken
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._give_back(call)  # handed a slot, then cancelled before it ran
                else:
                    waiter.cancel()
                    queue = self._queues.get(call)
                    if queue is not None and waiter in queue:
                        queue.remove(waiter)
                        if not queue:
                            del self._queues[call]
                raise
        try:
            yield
        finally:
            self._give_back(call)


class RemoteBackend(DecisionBackend):
    """Forwards to `url` with an optional bearer key, asking for `model`."""

    concurrent = True

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        model: str = "jev-latest",
        timeout_s: float = DEFAULT_REMOTE_TIMEOUT_S,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        transport: httpx.AsyncBaseTransport | None = None,
        sync_transport: httpx.BaseTransport | None = None,
        key_setting: str = "--remote-key-env",
        model_hint: str = "check --remote-model",
    ) -> None:
        parsed = httpx.URL(url) if "://" in url else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"remote URL {url!r} is not an http(s) URL with a host; e.g. remote:http://127.0.0.1:8795")
        if timeout_s <= 0 or max_in_flight < 1:
            raise ValueError(f"need timeout_s > 0 and max_in_flight >= 1; got {timeout_s}, {max_in_flight}")
        self.url = str(parsed).rstrip("/").removesuffix("/v1")
        self.key_setting = key_setting  # where its user sets the key it sends, for a refused key's message
        self.model_hint = model_hint  # what its user can do about a model the upstream does not serve
        self.model = model
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        # gzip or nothing: a body is decoded here in bounded steps (_BoundedBody), which zstd and brotli, decoded
        # whole by the HTTP library, were not (19 KB of zstd grew the proxy by 1.2 GB)
        self.headers = {"Accept": "application/json", "Accept-Encoding": "gzip",
                        "User-Agent": f"jevserve-proxy/{__version__}"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._transport = transport
        self._sync_transport = sync_transport
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: httpx.AsyncClient | None = None
        self._slots: FairSlots | None = None
        self._sync_http: httpx.Client | None = None
        # The forwarded model's release date is the upstream's to say: learn_card() takes it from the upstream's
        # listing when the server starts. Until then (or if the upstream cannot say) the contract's YYYY-MM-DD field
        # holds the epoch, and the description says that it is not a date.
        self.card = ModelCard(
            name=f"remote-{model}",
            description=f"{model} at {self.url} (forwarded; release date unknown: not read from the upstream at start)",
            release_date=UNKNOWN_RELEASE_DATE,
        )
        # Why the upstream cannot answer, as the last exchange with it showed (None once one succeeded): a proxy's
        # /healthz reports it, since a proxy whose upstream refuses its key or does not answer serves nothing.
        self.upstream_problem: str | None = None
        self._answered_at = -math.inf  # when the upstream last answered a request (monotonic seconds)
        self._rechecked = -math.inf  # when recheck() last asked the upstream (monotonic seconds)
        self._probe_task: asyncio.Task | None = None  # recheck()'s question under way
        self._card_task: asyncio.Task | None = None  # the listing asked again once a failing upstream answers

    # -- async path (the server) -------------------------------------------------------------------------------

    async def learn_card(self) -> str | None:
        """Take the forwarded model's description and release date from the upstream's `GET /v1/models`. None when
        it did, else why not (the card stays as it was: a listing must not fail a server's start)."""
        response = await self._listing()
        if response is None or response.status_code in (401, 403):
            return self.upstream_problem
        try:
            listed = response.json().get("models", []) if response.status_code == 200 else None
        except (ValueError, AttributeError):
            listed = None
        if not isinstance(listed, list):
            return f"the upstream {self.url} answered GET /v1/models with no model list (status {response.status_code})"
        for entry in listed:
            if not isinstance(entry, dict) or entry.get("name") != self.model:
                continue
            date, description = entry.get("release_date"), entry.get("description")
            if not (isinstance(date, str) and is_iso_date(date)):
                return f"the upstream {self.url} lists {self.model!r} without a YYYY-MM-DD release date"
            said = f"{description} " if isinstance(description, str) and description else ""
            self.card = replace(self.card, release_date=date,
                                description=f"{said}({self.model} at {self.url}, forwarded)")
            return None
        return f"the upstream {self.url} does not list {self.model!r}"

    async def recheck(self) -> str | None:
        """Ask the upstream again while a problem is recorded (at most once per RECHECK_S), so a proxy whose
        upstream came back is healthy again without waiting for a client to try: behind a load balancer that stops
        sending to an unhealthy proxy, no client would. Returns the problem left, if any.

        It asks what clients ask, one small decision (PROBE), not the upstream's model listing: a listing answers
        while decisions fail or hang, which cleared the problem within seconds of every failed request. The probe
        runs in the background, so a health check never waits for a hung upstream: its outcome is what the next
        check reads."""
        if self.upstream_problem is None:
            return None
        idle = self._probe_task is None or self._probe_task.done()
        if idle and time.monotonic() - self._rechecked >= RECHECK_S:
            self._rechecked = time.monotonic()
            self._probe_task = asyncio.get_running_loop().create_task(self._probe())
        return self.upstream_problem

    async def _probe(self) -> None:
        with contextlib.suppress(SystemOneError):  # decide_async records the outcome (a 429 or a 4xx: unchanged)
            await self.decide_async([PROBE])

    async def _listing(self) -> httpx.Response | None:
        """The upstream's answer to `GET /v1/models`, or None when it could not be reached; either, and a refused
        key, recorded as `upstream_problem`."""
        http, _ = self._async_client()
        try:
            request = http.build_request("GET", "/v1/models", timeout=min(self.timeout_s, CARD_TIMEOUT_S))
            head = await http.send(request, stream=True)
            try:  # bounded as an answer is: a 200 MB listing grew the proxy by 600 MB at its start
                response = await self._read_async(head)
            finally:
                await head.aclose()
        except BackendError as exc:  # a listing past the bound, or in an encoding not read
            self.upstream_problem = str(exc)
            return None
        except httpx.HTTPError as exc:
            self.upstream_problem = f"the upstream {self.url} could not be reached ({type(exc).__name__})"
            return None
        if response.status_code in (401, 403):
            self.upstream_problem = str(self.upstream_error(response))
        return response

    def _async_client(self) -> tuple[httpx.AsyncClient, FairSlots]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a pool and a semaphore belong to one event loop
            # An idle connection is dropped here before the upstream drops it: uvicorn (jevserve serve's own server)
            # closes one after 5 s idle, httpx's default expiry is the same 5 s, and a request sent on a connection
            # as the server closes it fails with a ReadError (an outside tester's 502 from a healthy upstream)
            limits = httpx.Limits(max_connections=self.max_in_flight, max_keepalive_connections=self.max_in_flight,
                                  keepalive_expiry=POOL_KEEPALIVE_S)
            # retries=1 repeats only a failed *connect* (nothing reached the upstream), so no answer is asked twice.
            transport = self._transport or httpx.AsyncHTTPTransport(retries=1, limits=limits)
            self._http = httpx.AsyncClient(
                base_url=self.url, headers=self.headers, timeout=self.timeout_s, transport=transport, limits=limits
            )
            self._slots = FairSlots(self.max_in_flight)
            self._loop = loop
        return self._http, self._slots

    async def decide_async(self, items: Sequence[DecisionItem]) -> Decisions:
        """One upstream request per distinct state, all at once, under one deadline of `timeout_s`."""
        http, slots = self._async_client()
        groups = _by_state(items)
        call = object()  # this call, for the slots' fair share (FairSlots)

        waiting = len(groups)  # of this call's upstream requests, those still waiting for one of this proxy's slots
        started = time.monotonic()

        async def ask(state: str, indices: list[int]) -> tuple[list[np.ndarray], int]:
            nonlocal waiting
            async with slots.slot(call):
                waiting -= 1
                if (waited := time.monotonic() - started) > self.timeout_s * MAX_QUEUED_SHARE:
                    # most of the deadline went in this proxy's queue: the upstream would get too little of it
                    # to answer, and the 504 that followed blamed it for the proxy's own load
                    raise self._queue_full(waited)
                try:
                    request = http.build_request("POST", "/v1/systemone", json=self._payload(state, indices, items))
                    response = await http.send(request, stream=True)
                    try:
                        answer = await self._read_async(response)
                    except (httpx.TransportError, BackendError):
                        if response.status_code != 429:
                            raise
                        answer = _with_body(response, b"")  # still the upstream's refusal for its load, and its hint
                    finally:
                        await response.aclose()
                except httpx.TimeoutException as exc:
                    raise self._timeout() from exc
                except httpx.TransportError as exc:
                    raise self._broken(exc) from exc
            return self._read(answer, indices, items)

        async def ask_all() -> list[tuple[list[np.ndarray], int]]:
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(ask(state, indices)) for state, indices in groups.items()]
            except BaseExceptionGroup as failed:  # one failed upstream request fails the client's request
                raise _first(failed) from None
            return [task.result() for task in tasks]

        try:
            async with asyncio.timeout(self.timeout_s):
                answered = await ask_all()
        except TimeoutError as exc:
            if waiting:
                # the deadline passed in this proxy's own queue: its load, not the upstream's health, so an
                # overload the client backs off from (it was a 504 internal_error, which a burst of 200 made of a
                # third of the requests to a healthy upstream)
                raise self._queue_full(self.timeout_s) from exc
            if time.monotonic() - self._answered_at > self.timeout_s:
                # nothing answered for a whole deadline: hung or down, which /healthz says; an upstream that
                # answers others meanwhile is busy, and a busy one is not taken out of rotation
                self.upstream_problem = str(self._timeout())
            raise self._timeout() from exc
        except UpstreamRejected:  # the client's request, not the upstream's health
            raise
        except BackendError as exc:  # an upstream 429 is its load, not its health: it is not recorded
            self.upstream_problem = str(exc)
            raise
        if self.upstream_problem is not None and self.card.release_date == UNKNOWN_RELEASE_DATE:
            # an upstream that could not list its model at start (down, or refusing the key) answers now
            self._card_task = asyncio.get_running_loop().create_task(self.learn_card())
        self.upstream_problem = None
        self._answered_at = time.monotonic()
        return self._assemble(items, groups, answered)

    async def aclose(self) -> None:
        """Close the async connection pool."""
        for task in (self._probe_task, self._card_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._http is not None:
            await self._http.aclose()
            self._http, self._loop = None, None

    # -- sync path (scripts, tests, in-process callers without an event loop) -----------------------------------

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """The same requests one after another on a blocking client."""
        if self._sync_http is None:
            self._sync_http = httpx.Client(
                base_url=self.url, headers=self.headers, timeout=self.timeout_s, transport=self._sync_transport,
                limits=httpx.Limits(keepalive_expiry=POOL_KEEPALIVE_S),
            )
        groups = _by_state(items)
        answered = []
        for state, indices in groups.items():
            try:
                with self._sync_http.stream("POST", "/v1/systemone",
                                            json=self._payload(state, indices, items)) as response:
                    try:
                        answer = self._read_sync(response)
                    except (httpx.TransportError, BackendError):
                        if response.status_code != 429:
                            raise
                        answer = _with_body(response, b"")
            except httpx.TimeoutException as exc:
                raise self._timeout() from exc
            except httpx.TransportError as exc:
                raise self._broken(exc) from exc
            answered.append(self._read(answer, indices, items))
        return self._assemble(items, groups, answered).probabilities

    def close(self) -> None:
        """Close the blocking client (the async pool closes with `aclose`)."""
        if self._sync_http is not None:
            self._sync_http.close()
            self._sync_http = None

    # -- shared: payloads and what an upstream answer means ------------------------------------------------------

    def _payload(self, state: str, indices: list[int], items: Sequence[DecisionItem]) -> dict[str, Any]:
        questions = {f"q{n}": to_wire(items[i].question) for n, i in enumerate(indices)}
        return {"state": state, "model": self.model, "questions": questions}

    async def _read_async(self, response: httpx.Response) -> httpx.Response:
        """`response` (sent with stream=True) read whole within the bound (_BoundedBody)."""
        if response.is_stream_consumed:  # already read (a mock transport's answer): as decoded as it will be
            return _BoundedBody(response, self.url, decoded=response.content).response()
        body = _BoundedBody(response, self.url)
        async for piece in response.aiter_raw():
            body.add(piece)
        return body.response()

    def _read_sync(self, response: httpx.Response) -> httpx.Response:
        """`_read_async` for the blocking client."""
        if response.is_stream_consumed:
            return _BoundedBody(response, self.url, decoded=response.content).response()
        body = _BoundedBody(response, self.url)
        for piece in response.iter_raw():
            body.add(piece)
        return body.response()

    def _queue_full(self, waited_s: float) -> OverloadedError:
        return OverloadedError(f"this server's {self.max_in_flight} connections to upstream {self.url} stayed busy "
                               f"for {waited_s:.1f} s of the {self.timeout_s:g} s deadline: retry later",
                               retry_after_s=self.timeout_s)

    def _timeout(self) -> UpstreamTimeout:
        return UpstreamTimeout(f"upstream {self.url} did not answer within {self.timeout_s:g} s",
                               retry_after_s=self.timeout_s)

    def _broken(self, exc: Exception) -> BackendError:
        return BackendError(f"upstream {self.url} unreachable or connection broken: {type(exc).__name__}: {exc}")

    def _read(
        self, response: httpx.Response, indices: list[int], items: Sequence[DecisionItem]
    ) -> tuple[list[np.ndarray], int]:
        if response.status_code != 200:
            raise self.upstream_error(response)
        try:
            parsed = SystemOneResponse.model_validate_json(response.content, strict=True)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            loc = list(first.get("loc", ()))
            if len(loc) > 2 and loc[0] == "answers" and loc[2] in ("noul", "choice", "score"):
                del loc[2]  # pydantic's name for the union member the answer's type picked, not a field
            got = first.get("input")
            short = isinstance(got, int | float | bool) or (isinstance(got, str) and len(got) <= 40)
            shown = f" (got {json.dumps(got)})" if loc and short else ""
            where = f"{'.'.join(map(str, loc))}: " if loc else ""
            raise BackendError(f"upstream answer is not a valid System One response: {where}{first['msg']}{shown}"
                               ) from exc
        probabilities = []
        for n, i in enumerate(indices):
            answer = parsed.answers.get(f"q{n}")
            if answer is None:
                raise BackendError(f"upstream answer is missing question q{n}")
            try:
                probabilities.append(probabilities_from_answer(items[i].question, answer))
            except InvalidProbabilitiesError as exc:
                raise BackendError(f"upstream answer to question q{n} is invalid: {exc}") from exc
        return probabilities, parsed.usage.input_tokens

    def upstream_error(self, response: httpx.Response) -> SystemOneError:
        """The error the client gets for an upstream's non-200 answer (table in the module docstring)."""
        status, message = response.status_code, _upstream_message(response)
        if status == 429:
            hint = retry_after_s(response.headers)
            # passed on within (0, MAX_RETRY_AFTER_S]: an upstream's 99999999999 s (or NaN) would park clients
            wait_s = min(hint, MAX_RETRY_AFTER_S) if hint is not None and hint > 0 else 1.0
            return OverloadedError(f"upstream {self.url} is rate limiting (429): {message}", retry_after_s=wait_s)
        if status in (401, 403):
            return BackendError(
                f"upstream {self.url} {KEY_REFUSED} ({status}: {message}); the key sent to it "
                f"({self.key_setting}) is missing or wrong, not the client's"
            )
        if status == 404:
            return BackendError(
                f"upstream {self.url} does not serve model {self.model!r} (404: {message}); {self.model_hint}"
            )
        if 300 <= status < 400:  # "failed (307): " said nothing of where it pointed
            location = response.headers.get("location")
            return BackendError(
                f"upstream {self.url} redirected ({status}) to {location or 'no location'}; a System One endpoint "
                "does not redirect POST /v1/systemone: give remote: the URL it redirects to")
        if 400 <= status < 500 and status != 408:
            rejected = UpstreamRejected(f"upstream rejected the request ({status}): {message}")
            rejected.status_code = status
            return rejected
        failed = BackendError(f"upstream {self.url} failed ({status}): {message}")
        failed.upstream_status = status  # a server error a patient caller (gateway calibration) may ask again
        return failed

    @staticmethod
    def _assemble(
        items: Sequence[DecisionItem], groups: Mapping[str, list[int]], answered: Sequence[tuple[list, int]]
    ) -> Decisions:
        out: list[np.ndarray | None] = [None] * len(items)
        tokens = 0
        for indices, (probabilities, used) in zip(groups.values(), answered, strict=True):
            tokens += used
            for i, p in zip(indices, probabilities, strict=True):
                out[i] = p
        return Decisions(out, input_tokens=tokens)  # type: ignore[arg-type]


class _BoundedBody:
    """An upstream answer's body, decoded as it arrives and refused (BackendError) once it passes MAX_ANSWER_BYTES:
    identity or gzip only, each piece inflated no further than the bound allows."""

    def __init__(self, response: httpx.Response, url: str, *, decoded: bytes | None = None) -> None:
        self.response_head, self.url = response, url
        self._body = bytearray()
        self._inflate = None
        if decoded is not None:  # a body read before (by the HTTP library, decoded): only its size is checked
            self._keep(decoded)
            return
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip"):
            raise BackendError(f"upstream {url} answered in content-encoding {encoding!r}, which this proxy does not "
                               "read (it asks for gzip or none)")
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS) if "gzip" in encoding else None

    def add(self, raw: bytes) -> None:
        """Decode one raw piece of the body and keep it."""
        if self._inflate is None:
            self._keep(raw)
            return
        try:
            pending = raw
            while pending:
                self._keep(self._inflate.decompress(pending, MAX_ANSWER_BYTES + 1 - len(self._body)))
                pending = self._inflate.unconsumed_tail
        except zlib.error as exc:
            raise BackendError(f"upstream {self.url} sent a body that is not the gzip it said: {exc}") from exc

    def _keep(self, decoded: bytes) -> None:
        self._body += decoded
        if len(self._body) > MAX_ANSWER_BYTES:
            raise BackendError(f"upstream {self.url} sent an answer over {MAX_ANSWER_BYTES // 2**20} MiB; it was not "
                               "read further")

    def response(self) -> httpx.Response:
        """The answer, its body decoded, as a whole response to parse."""
        if self._inflate is not None:
            self._keep(self._inflate.flush())  # what the inflater still holds (nothing, for a whole gzip stream)
        return _with_body(self.response_head, bytes(self._body))


def _with_body(head: httpx.Response, body: bytes) -> httpx.Response:
    """A whole response of `head`'s status and headers with `body`, already decoded (so its framing and encoding
    headers are dropped)."""
    headers = {k: v for k, v in head.headers.items()
               if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")}
    return httpx.Response(head.status_code, headers=headers, content=body, request=head.request)



def _by_state(items: Sequence[DecisionItem]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(item.state, []).append(i)
    return groups


def _first(group: BaseExceptionGroup) -> BaseException:
    # The contract error if there is one (it says what went wrong upstream), else whatever came first.
    leaves = []
    stack = [group]
    while stack:
        for exc in stack.pop().exceptions:
            (stack if isinstance(exc, BaseExceptionGroup) else leaves).append(exc)
    return next((e for e in leaves if isinstance(e, SystemOneError)), leaves[0])
