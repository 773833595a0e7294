"""Calling upstreams: concurrency gate, retries only while nothing reached the model, fallback, circuit breaker.

For each upstream of the route, in order:
  1. skip it while its circuit is open (`breaker_failures` failed requests in a row open it for `breaker_reset_s`;
     after that one request at a time is let through as a trial, whose success closes it and whose failure re-opens
     it at once);
  2. take a slot at its gate (gate.py), where admission applies: `defer` waits until the deadline, `reject`
     answers 429 when the queue is full, `overflow` moves on to the next upstream;
  3. send. An LLM call is not idempotent, so it is retried (`max_retries` times, doubling backoff, an upstream's
     Retry-After counted up to 5 s) and then sent to the next upstream only when the upstream cannot have started
     on it: the connection failed or timed out (`connect_timeout_s`), or it answered 429 or 503. Once the request
     was sent, a timeout (`timeout_s` without a byte) or a broken connection ends the request with a 502/504, and
     any other answer (a 500 or a 4xx included) is the client's.
A stream is committed to an upstream once its 2xx headers arrive; the slot is released when the body is done, and
the stream counts for or against the circuit then: against it when it broke off, stalled, ended before [DONE] or sent
an event that is no JSON; neither when its client left first.

Worst-case wait: the admission deadline (`deadline_s`, queueing and retries included) plus one `timeout_s` for the
upstream that took the request (per read: a stream may last longer while bytes keep coming).
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from jevserve.argtypes import connect_port
from jevserve.client import retry_after_s
from jevserve.gateway.config import PLACEHOLDER_URL, AdmissionConfig, GatewayConfig, UpstreamConfig
from jevserve.gateway.errors import (
    UpstreamError,
    UpstreamsBusyError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)
from jevserve.gateway.gate import QueueFull, UpstreamGate
from jevserve.gateway.placeholder import placeholder_transport
from jevserve.gateway.store import Store
from jevserve.gateway.transport import AiohttpTransport
from jevserve.protocol import strict_json
from jevserve.serving import Request, make_queue_policy

MAX_HINTED_BACKOFF_S = 5.0


# An answer whose body broke off, stalled or cannot be decoded by its Content-Encoding (a body labelled gzip that is
# not: httpx's DecodingError is no TransportError, and it was the gateway's own 500, never counted for the circuit)
BROKEN_ANSWER = (httpx.TransportError, httpx.DecodingError)

# Answers that say the upstream did not start on the request, so sending it again cannot run it twice.
RETRYABLE_STATUSES = frozenset({429, 503})
UNHEALTHY_STATUSES = frozenset({502, 504})  # answers that count against the circuit (with the retried 503)


@dataclass(frozen=True)
class Attempt:
    """One try at one upstream."""

    upstream: str
    status: int | None  # HTTP status, None when no answer came
    error: str | None  # what went wrong (None for a final answer)
    ms: float  # time the try took
    outcome: str = ""  # a bounded label for metrics: http_503, connect_error, read_timeout, circuit_open, ...

    def describe(self) -> str:
        """`name: 503` or `name: ConnectError ...`: the whole story, for the log (it may name hosts and ports)."""
        return f"{self.upstream}: {self.status if self.status is not None else self.error}"

    def public(self) -> str:
        """`name: 503` or `name: could not connect`: what a client may be told (no address, no exception text)."""
        if self.status is not None:
            return f"{self.upstream}: {self.status}"
        return f"{self.upstream}: {_PUBLIC_OUTCOMES.get(self.outcome, 'failed')}"


_PUBLIC_OUTCOMES = {
    "connect_error": "could not connect",
    "connect_timeout": "no connection within its connect timeout",
    "circuit_open": "circuit open after repeated failures",
    "queue_full": "queue full",
    "queue_timeout": "no slot before the deadline",
    "read_timeout": "nothing within its timeout after the request was sent",
    "read_error": "connection broken after the request was sent",
    "bad_encoding": "answer not readable by its Content-Encoding",
}


def public_summary(attempts: Sequence[Attempt]) -> str:
    """The attempts as a client may read them, repeats counted: `a: could not connect (×2); b: 503`."""
    counts: dict[str, int] = {}
    for attempt in attempts:
        line = attempt.public()
        counts[line] = counts.get(line, 0) + 1
    return "; ".join(line if n == 1 else f"{line} (×{n})" for line, n in counts.items())


@dataclass
class Dispatched:
    """An upstream's answer (body read, or open for streaming) and the slot it holds until `close`."""

    response: httpx.Response
    upstream: Upstream
    attempts: list[Attempt] = field(default_factory=list)
    holds_slot: bool = True  # False: a refusal (429, 503) read whole after its slot was given back
    payload: Any = None  # a whole answer's JSON value, parsed once here (None: no JSON, or a stream)
    counts_at_close: bool = False  # an answer to a stream request: whether it was one is known once it is read
    _closed: bool = False

    def is_an_answer(self) -> bool:
        """Whether a whole-read answer counts for the upstream's circuit. A proxy's 502/504 says the server behind it
        is unreachable; a 500 is about this request (one client's prompt the model fails on, retried twice by the
        openai client): counted, it let one bad prompt open the circuit and black out the route for everyone. A 2xx
        that is no JSON object (a proxy's HTML page, a truncated body) is no answer either: counted as a success, an
        upstream that sent only such pages kept its circuit closed and its route never fell over to the next."""
        status = self.response.status_code
        return status not in UNHEALTHY_STATUSES and (not 200 <= status < 300 or isinstance(self.payload, dict))

    async def read_whole(self) -> None:
        """Read an answer to a stream request that is not relayed as a stream (an error status, or a 2xx that is no
        event stream) whole, parse it, close it and count it; raises UpstreamError (502) or UpstreamTimeoutError (504)
        when its body breaks off or stalls: read unguarded, that was a 500 with the library's words, and the slot of
        the body that broke was never given back (two of them held a `max_concurrency: 2` upstream for good)."""
        started = time.monotonic()
        try:
            await self.response.aread()
        except BROKEN_ANSWER as exc:
            failed = _failed_after_sending(self.upstream.name, exc, started, self.attempts)
            await self.close(healthy=False)
            raise failed from None
        except BaseException:
            await self.close()
            raise
        self.payload = json_value(self.response.content)
        await self.close(healthy=self.is_an_answer())

    async def close(self, *, healthy: bool | None = None) -> None:
        """Close the response and release the upstream slot (idempotent). An answer to a stream request counts
        `healthy` for or against the upstream's circuit (None: neither, as for a stream its client left)."""
        if self._closed:
            return
        self._closed = True
        await self.response.aclose()
        if self.holds_slot:
            await self.upstream.gate.release()
        if self.counts_at_close and healthy is not None:
            await self.upstream.count(healthy)


class Upstream:
    """One configured upstream: its HTTP client, gate and breaker settings."""

    def __init__(
        self,
        config: UpstreamConfig,
        store: Store,
        *,
        queue_policy: str = "fcfs",
        aging_s: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.name = config.name
        self.is_placeholder = config.url == PLACEHOLDER_URL
        if transport is None:
            transport = (
                placeholder_transport()
                if self.is_placeholder
                else AiohttpTransport(max_connections=config.max_concurrency)
            )
        base_url = "http://placeholder.invalid/v1" if self.is_placeholder else config.url
        headers = {}
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
        timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)
        self.client = httpx.AsyncClient(base_url=base_url, headers=headers, timeout=timeout, transport=transport)
        self._urls: dict[str, httpx.URL] = {}
        self.gate = UpstreamGate(
            config.name, config.max_concurrency, make_queue_policy(queue_policy, aging_s=aging_s), store
        )

    def url(self, path: str) -> httpx.URL:
        """The absolute URL of `path` under the upstream's base URL, parsed once per path (httpx would parse and
        merge it on every request)."""
        url = self._urls.get(path)
        if url is None:
            base = self.client.base_url  # httpx keeps it with a trailing slash
            url = self._urls[path] = base.copy_with(raw_path=base.raw_path + path.lstrip("/").encode())
        return url

    @property
    def takes_priority(self) -> bool:
        """vLLM upstreams schedule by the request's `priority` field themselves."""
        return self.config.kind == "vllm"

    @property
    def trial_hold_s(self) -> float:
        """How long a half-open circuit's trial request holds it open: another `breaker_reset_s`. A trial whose
        result counts neither way (a 429, a client that left) or comes later (a long stream) lets another through
        then, so an upstream is never skipped longer than an open circuit skips it, and the 503's Retry-After
        while every upstream is held stays the reset's."""
        return self.config.breaker_reset_s

    async def count(self, ok: bool) -> None:
        """Count one request's answer for (`ok`) or against the circuit."""
        await self.store.record_result(self.name, ok, self.config.breaker_failures, self.config.breaker_reset_s)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def _hinted_delay_s(response: httpx.Response | None) -> float | None:
    """The upstream's Retry-After (seconds or an HTTP date, as clients read it), None when it gives none."""
    if response is None:
        return None
    hint = retry_after_s(response.headers)
    return None if hint is None or not math.isfinite(hint) else max(0.0, hint)


async def _try_upstream(
    upstream: Upstream,
    path: str,
    body: dict,
    *,
    stream: bool,
    attempts: list[Attempt],
    deadline_at: float,
    headers: Mapping[str, str] | None = None,
    refusals: list[tuple[Upstream, httpx.Response]] | None = None,
) -> httpx.Response | None:
    """The upstream's final answer, or None when it could not take the request (try the next upstream); raises
    UpstreamError when the request was sent and then failed (it must not be sent again). A 429 or 503 it still
    answered after the retries is appended to `refusals`, read whole, for the client when no upstream answers."""
    config = upstream.config
    status = None
    for retry in range(config.max_retries + 1):
        started = time.monotonic()
        response = None
        try:
            request = upstream.client.build_request("POST", upstream.url(path), json=body, headers=headers)
            # the body is read here, not with the headers: sent whole, a 429 or 503 whose body broke off lost its
            # status (a 502) where the same answer to a stream request stayed the refusal it is
            response = await upstream.client.send(request, stream=True)
            if not stream and response.status_code not in RETRYABLE_STATUSES:
                await _read_answer(response)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:  # it never reached the model
            kind = "connect_timeout" if isinstance(exc, httpx.TimeoutException) else "connect_error"
            attempts.append(Attempt(upstream.name, None, _describe(exc), _ms(started), kind))
        except BROKEN_ANSWER as exc:  # sent: the model may be working on it, so it is not sent again
            failed = _failed_after_sending(upstream.name, exc, started, attempts)
            await upstream.count(False)
            raise failed from None
        else:
            status = response.status_code
            if status not in RETRYABLE_STATUSES:
                attempts.append(Attempt(upstream.name, status, None, _ms(started), f"http_{status}"))
                return response  # counted for or against the circuit by `dispatch`
            attempts.append(Attempt(upstream.name, status, "retryable status", _ms(started), f"http_{status}"))
            response = await _read_refusal(response)  # kept for the client should this be the last answer
        delay = _hinted_delay_s(response)
        if delay is None:
            delay = config.backoff_s * (2**retry)
        # never sooner than the backoff: told `Retry-After: 0`, the tries went out within 70 ms and all were refused
        delay = max(delay, config.backoff_s)
        # a hint past MAX_HINTED_BACKOFF_S ends the tries here: its refusal goes on (to the next upstream, or to the
        # client with that Retry-After) rather than being asked again 5 s later
        long_hint = delay > MAX_HINTED_BACKOFF_S
        if retry == config.max_retries or long_hint or time.monotonic() + delay >= deadline_at:
            if response is not None and refusals is not None:
                refusals.append((upstream, response))
            break
        await asyncio.sleep(delay)
    # one failure per request, its retries included: counted per try, two requests to an upstream restarting for a
    # few seconds opened its circuit (with the defaults' 3 tries each) and the route answered 503 for 30 s. A 429
    # is the upstream's answer about its load, not its health (a hosted API limits per model: counted, one model's
    # limit opened the circuit of every route on that URL), so it is not counted against the circuit; nor for it
    # (counted as a success, one 429 among failing 503s kept a failing upstream's circuit closed).
    if not (status == 429 and response is not None):
        await upstream.count(False)
    return None


def _failed_after_sending(name: str, exc: httpx.HTTPError, started: float, attempts: list[Attempt]) -> UpstreamError:
    """The error of a request whose answer broke off or could not be decoded (502) or stalled (504) after it was
    sent, its attempt appended: not sent again, since the model may have run it."""
    kind = ("read_timeout" if isinstance(exc, httpx.TimeoutException)
            else "bad_encoding" if isinstance(exc, httpx.DecodingError) else "read_error")
    attempts.append(Attempt(name, None, _describe(exc), _ms(started), kind))
    return (UpstreamTimeoutError if kind == "read_timeout" else UpstreamError)(
        f"{attempts[-1].public()}; not retried, since the model may have run it", attempts=attempts)


async def _read_answer(response: httpx.Response) -> None:
    """Read a whole answer's body; raises what the read raised (BROKEN_ANSWER: the answer broke off, stalled or
    could not be decoded), its connection given back however the read ends."""
    try:
        await response.aread()
    except BaseException:  # a client that left too: its connection goes back
        await response.aclose()
        raise


async def _read_refusal(response: httpx.Response) -> httpx.Response:
    """A 429 or 503 read whole (a small body); one whose body breaks off is kept as its status and headers alone,
    still a refusal for load (read unguarded, it was the gateway's own 500)."""
    try:
        await response.aread()
    except BROKEN_ANSWER:
        await response.aclose()
        kept = {k: v for k, v in response.headers.items()
                if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")}
        return httpx.Response(response.status_code, headers=kept, content=b"", request=response.request)
    except BaseException:
        # a client that left while the body stalled: its connection goes back (kept open, two of them held a
        # `max_concurrency: 2` upstream's connections for good)
        await response.aclose()
        raise
    return response


def json_value(content: bytes) -> Any:
    """An answer's JSON value, None when it is no JSON (a proxy's page, a truncated body, NaN, nesting too deep)."""
    try:
        return strict_json.loads(content)
    except ValueError:
        return None




def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__} {exc}".strip()


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


async def dispatch(
    upstreams: Sequence[Upstream],
    path: str,
    body: dict,
    *,
    stream: bool,
    request: Request,
    admission: AdmissionConfig,
    deadline_at: float,
    priority: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Dispatched:
    """Send `body` to the first upstream that answers (see the module docstring); raises UpstreamError or
    UpstreamsBusyError (429) when every one is full."""
    attempts: list[Attempt] = []
    refusals: list[tuple[Upstream, httpx.Response]] = []  # 429s and 503s still answered after the retries
    num_full = 0
    now_epoch = time.time()
    open_until: list[float] = []  # of the circuits found open, for the Retry-After when all of them are
    for upstream in upstreams:
        circuit = await upstream.store.circuit(upstream.name)
        # half-open (its reset passed): one request claims the trial and holds the circuit open while it tries;
        # the others skip it as open, so a burst arriving at the reset does not all wait on an upstream still down
        if circuit.open_until > 0.0 and (circuit.open_until > now_epoch or not await upstream.store.claim_trial(
                upstream.name, upstream.trial_hold_s)):
            attempts.append(Attempt(upstream.name, None, "circuit open", 0.0, "circuit_open"))
            held = circuit.open_until if circuit.open_until > now_epoch else now_epoch + upstream.trial_hold_s
            open_until.append(held)
            continue
        remaining = deadline_at - time.monotonic()
        max_queue = admission.max_queue if admission.enabled and admission.action != "defer" else None
        try:
            await upstream.gate.acquire(request, timeout_s=max(0.0, remaining), max_queue=max_queue)
        except QueueFull as exc:
            num_full += 1
            if admission.action == "reject":
                attempts.append(Attempt(upstream.name, None, f"queue full: {exc}", 0.0, "queue_full"))
                raise UpstreamsBusyError(f"overloaded: {exc}", retry_after_s=1.0, attempts=attempts) from None
            attempts.append(Attempt(upstream.name, None, "queue full (overflow)", 0.0, "queue_full"))
            continue
        except TimeoutError:
            waited = f"no slot within the {admission.deadline_s:g} s deadline"
            attempts.append(Attempt(upstream.name, None, waited, 0.0, "queue_timeout"))
            raise UpstreamsBusyError(
                f"overloaded: no upstream slot within the {admission.deadline_s:g} s deadline "
                "(decision time included)",
                retry_after_s=max(1.0, admission.deadline_s / 4),
                attempts=attempts,
            ) from None
        sent = dict(body)
        if priority is not None and upstream.takes_priority:
            sent["priority"] = priority
        try:
            response = await _try_upstream(
                upstream, path, sent, stream=stream, attempts=attempts, deadline_at=deadline_at, headers=headers,
                refusals=refusals,
            )
        except BaseException:
            await upstream.gate.release()
            raise
        if response is None:
            await upstream.gate.release()
            continue
        dispatched = Dispatched(response, upstream, attempts, counts_at_close=stream)
        if not stream:  # read whole by `_try_upstream`
            dispatched.payload = json_value(response.content)
            await dispatched.close()
            await upstream.count(dispatched.is_an_answer())
        return dispatched
    if refusals:
        # an upstream that answered still refused for its load: its answer (status, body, Retry-After) reaches the
        # client as any other upstream error does, so clients back off as it asks (as a 502 the openai client retried
        # at once, three requests for one, and code catching RateLimitError missed it)
        refused_by, refusal = refusals[-1]
        return Dispatched(refusal, refused_by, attempts, holds_slot=False, payload=json_value(refusal.content))
    if num_full and num_full == len(upstreams):
        raise UpstreamsBusyError("overloaded: every upstream's queue is full", retry_after_s=1.0, attempts=attempts)
    if attempts and all(a.outcome == "circuit_open" for a in attempts):
        # nothing was tried: say when one will be, as for any overload (OpenAI's clients retry a 503 after it)
        raise UpstreamUnavailableError(
            f"no upstream answered: {public_summary(attempts)}; the next request is tried after the circuit's reset",
            attempts=attempts,
            retry_after_s=max(1.0, min(open_until) - time.time()),
        )
    summary = public_summary(attempts) or "no upstream is configured for this model"
    raise UpstreamError(f"no upstream answered: {summary}", attempts=attempts)


def unreachable_upstream_warnings(config: GatewayConfig, timeout_s: float = 1.0) -> list[str]:
    """One line per upstream nothing answers a TCP connection at (refused, no route, or no answer within
    `timeout_s`), or whose URL names no port a server can listen on: said at start, so a gateway that is ready while
    its model server is down is not a mystery until the first request's 502. A warning, not an error: the server
    may come up later (the circuit breaker copes). The upstreams are tried at once, not one after another."""
    tried = [(i, upstream) for i, upstream in enumerate(config.upstreams) if upstream.url != PLACEHOLDER_URL]
    if not tried:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(tried))) as pool:
        found = list(pool.map(lambda pair: _unreachable(pair[0], pair[1].name, pair[1].url, timeout_s), tried))
    return [line for line in found if line is not None]


def _unreachable(index: int, name: str, url: str, timeout_s: float) -> str | None:
    parts = urllib.parse.urlsplit(url)
    where = f"upstreams[{index}] ({name})"
    port = connect_port(url)
    if port is None:
        return (f"warning: {where}: url {url} names no port a server can listen on (1 to 65535); every request to "
                "it fails")
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
            return None
    except (OSError, ValueError) as exc:
        if isinstance(exc, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(exc, TimeoutError):
            why = f"no answer within {timeout_s:g} s"
        else:
            why = str(exc) or type(exc).__name__
        return (f"warning: {where}: nothing answers at {parts.hostname}:{port} ({why}); requests to it get 502 until "
                "it is up")
