"""Calling upstreams: concurrency gate, retries with backoff, fallback to the next upstream, circuit breaker.

For each upstream of the route, in order:
  1. skip it while its circuit is open (`breaker_failures` failures in a row open it for `breaker_reset_s`; after
     that requests pass again, and the next failure re-opens it at once);
  2. take a slot at its gate (gate.py), where admission applies: `defer` waits until the deadline, `reject`
     answers 429 when the queue is full, `overflow` moves on to the next upstream;
  3. send; 429, 5xx, connect errors and timeouts are retried `max_retries` times with doubling backoff (an
     upstream's Retry-After counts, capped at 5 s), then the next upstream is tried. Other 4xx are final: the
     request is at fault, and the client gets the upstream's answer.
A stream is committed to an upstream once its 2xx headers arrive; the slot is released when the body is done.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from jevserve.gateway.config import PLACEHOLDER_URL, AdmissionConfig, UpstreamConfig
from jevserve.gateway.errors import RateLimitedError, UpstreamError
from jevserve.gateway.gate import QueueFull, UpstreamGate
from jevserve.gateway.placeholder import placeholder_transport
from jevserve.gateway.store import Store
from jevserve.gateway.transport import AiohttpTransport
from jevserve.serving import Request, make_queue_policy

MAX_HINTED_BACKOFF_S = 5.0


@dataclass(frozen=True)
class Attempt:
    """One try at one upstream."""

    upstream: str
    status: int | None  # HTTP status, None when no answer came
    error: str | None  # what went wrong (None for a final answer)
    ms: float  # time the try took

    def describe(self) -> str:
        """`name: 503` or `name: ConnectError ...`."""
        return f"{self.upstream}: {self.status if self.status is not None else self.error}"


@dataclass
class Dispatched:
    """An upstream's answer (body read, or open for streaming) and the slot it holds until `close`."""

    response: httpx.Response
    upstream: Upstream
    attempts: list[Attempt] = field(default_factory=list)
    _closed: bool = False

    async def close(self) -> None:
        """Close the response and release the upstream slot (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self.response.aclose()
        await self.upstream.gate.release()


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

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _hinted_delay_s(response: httpx.Response | None) -> float | None:
    if response is None:
        return None
    value = response.headers.get("retry-after")
    try:
        return min(float(value), MAX_HINTED_BACKOFF_S) if value is not None else None
    except ValueError:
        return None


async def _try_upstream(
    upstream: Upstream,
    path: str,
    body: dict,
    *,
    stream: bool,
    attempts: list[Attempt],
    deadline_at: float,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response | None:
    """The upstream's final answer (2xx or a non-retryable 4xx), or None when every retry failed."""
    config = upstream.config
    for retry in range(config.max_retries + 1):
        started = time.monotonic()
        response = None
        try:
            request = upstream.client.build_request("POST", upstream.url(path), json=body, headers=headers)
            response = await upstream.client.send(request, stream=stream)
        except httpx.TransportError as exc:
            attempts.append(Attempt(upstream.name, None, f"{type(exc).__name__} {exc}".strip(), _ms(started)))
        else:
            if not _retryable(response.status_code):
                attempts.append(Attempt(upstream.name, response.status_code, None, _ms(started)))
                await upstream.store.record_result(upstream.name, True, config.breaker_failures, config.breaker_reset_s)
                return response
            attempts.append(Attempt(upstream.name, response.status_code, "retryable status", _ms(started)))
            await response.aclose()
        await upstream.store.record_result(upstream.name, False, config.breaker_failures, config.breaker_reset_s)
        if retry == config.max_retries:
            break
        delay = _hinted_delay_s(response)
        if delay is None:
            delay = config.backoff_s * (2**retry)
        if time.monotonic() + delay >= deadline_at:
            break
        await asyncio.sleep(delay)
    return None


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
    RateLimitedError (429) when none can."""
    attempts: list[Attempt] = []
    num_full = 0
    now_epoch = time.time()
    for upstream in upstreams:
        circuit = await upstream.store.circuit(upstream.name)
        if circuit.open_until > now_epoch:
            attempts.append(Attempt(upstream.name, None, "circuit open", 0.0))
            continue
        remaining = deadline_at - time.monotonic()
        max_queue = admission.max_queue if admission.enabled and admission.action != "defer" else None
        try:
            await upstream.gate.acquire(request, timeout_s=max(0.0, remaining), max_queue=max_queue)
        except QueueFull as exc:
            num_full += 1
            if admission.action == "reject":
                raise RateLimitedError(f"overloaded: {exc}", retry_after_s=1.0) from None
            attempts.append(Attempt(upstream.name, None, "queue full (overflow)", 0.0))
            continue
        except TimeoutError:
            raise RateLimitedError(
                f"overloaded: no upstream slot within the {admission.deadline_s:.0f} s deadline "
                "(decision time included)",
                retry_after_s=max(1.0, admission.deadline_s / 4),
            ) from None
        sent = dict(body)
        if priority is not None and upstream.takes_priority:
            sent["priority"] = priority
        try:
            response = await _try_upstream(
                upstream, path, sent, stream=stream, attempts=attempts, deadline_at=deadline_at, headers=headers
            )
        except BaseException:
            await upstream.gate.release()
            raise
        if response is None:
            await upstream.gate.release()
            continue
        dispatched = Dispatched(response, upstream, attempts)
        if not stream:
            try:
                await response.aread()
            finally:
                await dispatched.close()
        return dispatched
    if num_full and num_full == len(upstreams):
        raise RateLimitedError("overloaded: every upstream's queue is full", retry_after_s=1.0)
    summary = "; ".join(a.describe() for a in attempts) or "no upstream is configured for this model"
    raise UpstreamError(f"no upstream answered: {summary}")
