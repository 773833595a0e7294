"""Sync and async clients for any System One endpoint, with the official SDK's retry rules.

Retries (typesafe-sdk 0.7.x defaults): at most 2 retries; statuses 408, 429 and 5xx plus connection errors and
timeouts are retried; backoff 0.5 s doubling to at most 5 s with up to 25 % jitter subtracted; `retry-after-ms`,
then `Retry-After` (seconds or an HTTP date) take precedence; at most 30 s of retrying per call. 4xx answers other
than 408/429 are never retried. Both clients share `_ClientCore`, which does everything but the I/O.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel

from jevserve import __version__
from jevserve.protocol import DEFAULT_MODEL, SystemOneResponse

DEFAULT_TIMEOUT_S = 10.0


class SystemOneAPIError(Exception):
    """A non-2xx answer from a System One endpoint."""

    def __init__(self, status_code: int, error_type: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status_code} {error_type}: {message}")
        self.status_code = status_code
        self.error_type = error_type
        self.message = message
        self.body = body


class SystemOneConnectionError(Exception):
    """The endpoint could not be reached (or timed out) after every allowed retry."""


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before trying a request again."""

    max_retries: int = 2
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 5.0
    jitter: float = 0.25  # up to this fraction of the backoff is subtracted at random
    budget_s: float = 30.0  # no retry starts later than this after the first attempt

    @staticmethod
    def retryable_status(status: int) -> bool:
        """408, 429 and every 5xx are worth retrying; other statuses are final."""
        return status in (408, 429) or 500 <= status <= 599

    def delay_s(self, retry_index: int, headers: Mapping[str, str] | None, rng: random.Random) -> float:
        """Seconds to wait before retry number `retry_index` (0-based), honouring the server's hints first."""
        hinted = retry_after_s(headers) if headers is not None else None
        if hinted is not None:
            return max(0.0, hinted)
        backoff = min(self.initial_backoff_s * (2**retry_index), self.max_backoff_s)
        return backoff * (1.0 - self.jitter * rng.random())


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a 429 or 503 asks for, in seconds: `retry-after-ms`, else `Retry-After` as seconds or an HTTP date;
    None when it gives none that can be read, or a negative number of seconds (RFC 9110's delay-seconds has no sign;
    a date already past means now, 0 or less)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            if float(ms) >= 0:
                return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
        return seconds if seconds >= 0 else None
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return when.timestamp() - time.time()


def _question_wire(question: Any) -> Any:
    if isinstance(question, BaseModel):
        return question.model_dump(mode="json", exclude_unset=True)
    return question


class _ClientCore:
    """What both clients share: headers, payloads, response parsing, error mapping and retry decisions."""

    def __init__(self, base_url: str, api_key: str | None, retry: RetryPolicy | None, seed: int | None) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        self.retry = retry or RetryPolicy()
        self._rng = random.Random(seed)
        self.headers = {"Accept": "application/json", "User-Agent": f"jevserve/{__version__}"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"

    @staticmethod
    def payload(state: Any, questions: Mapping[str, Any], model: str | None, extra: Mapping[str, Any]) -> dict:
        """The request body: state, model, questions (dicts or protocol models), then any extra fields."""
        body = {
            "state": state,
            "model": model or DEFAULT_MODEL,
            "questions": {qid: _question_wire(q) for qid, q in questions.items()},
        }
        body.update(extra)
        return body

    @staticmethod
    def raise_for_error(response: httpx.Response) -> None:
        """Turn a non-2xx response into SystemOneAPIError carrying the contract's error fields."""
        if response.status_code < 400:
            return
        try:
            body = response.json()
        except ValueError:
            body = response.text
        error_type, message = "api_error", str(body)[:500]
        detail = body.get("detail") if isinstance(body, dict) else None
        if isinstance(detail, dict):
            error_type = str(detail.get("error_type", error_type))
            message = str(detail.get("message", message))
        elif isinstance(detail, list):
            error_type = "validation_error"
            message = "; ".join(
                ".".join(str(p) for p in item.get("loc", [])[1:]) + ": " + str(item.get("msg", ""))
                for item in detail
                if isinstance(item, dict)
            )
        raise SystemOneAPIError(response.status_code, error_type, message, body)

    def next_delay(self, retry_index: int, started: float, headers: Mapping[str, str] | None) -> float | None:
        """Seconds to wait before the next attempt, or None when no retry is left (count or budget)."""
        if retry_index >= self.retry.max_retries:
            return None
        delay = self.retry.delay_s(retry_index, headers, self._rng)
        if time.monotonic() - started + delay > self.retry.budget_s:
            return None
        return delay

    def after_attempt(
        self, retry_index: int, started: float, response: httpx.Response | None, error: Exception | None, what: str
    ) -> float | None:
        """None when `response` is final and good; a delay when to retry; raises when final and bad."""
        if response is not None and not self.retry.retryable_status(response.status_code):
            self.raise_for_error(response)
            return None
        delay = self.next_delay(retry_index, started, response.headers if response is not None else None)
        if delay is not None:
            return delay
        if response is not None:
            self.raise_for_error(response)
        raise SystemOneConnectionError(f"{what} at {self.base_url}: {error}") from error


_TRANSPORT_ERRORS = (httpx.TransportError,)


class SystemOne(_ClientCore):
    """Blocking client: `SystemOne(base_url, api_key=None).decide(state, questions)`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, api_key, retry, seed)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout_s, transport=transport)

    def decide(
        self, state: Any, questions: Mapping[str, Any], *, model: str | None = None, **extra: Any
    ) -> SystemOneResponse:
        """Ask `questions` about `state`; returns the parsed response (raises SystemOneAPIError on 4xx/5xx)."""
        raw = self.decide_raw(self.payload(state, questions, model, extra))
        return SystemOneResponse.model_validate(raw, strict=True)

    def decide_raw(self, body: Mapping[str, Any]) -> dict:
        """POST a ready-made body and return the JSON answer as a dict."""
        return self._request("POST", "/v1/systemone", json=body).json()

    def models(self) -> list[dict]:
        """The endpoint's `GET /v1/models` entries."""
        return self._request("GET", "/v1/models").json()["models"]

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        started, retry_index = time.monotonic(), 0
        while True:
            response, error = None, None
            try:
                response = self._http.request(method, path, **kwargs)
            except _TRANSPORT_ERRORS as exc:
                error = exc
            delay = self.after_attempt(retry_index, started, response, error, f"{method} {path}")
            if delay is None:
                return response
            time.sleep(delay)
            retry_index += 1

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> SystemOne:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncSystemOne(_ClientCore):
    """Asyncio client with the same methods as `SystemOne`, as coroutines."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        seed: int | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 100,
    ) -> None:
        super().__init__(base_url, api_key, retry, seed)
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=timeout_s, transport=transport, limits=limits
        )

    async def decide(
        self, state: Any, questions: Mapping[str, Any], *, model: str | None = None, **extra: Any
    ) -> SystemOneResponse:
        """Ask `questions` about `state`; returns the parsed response (raises SystemOneAPIError on 4xx/5xx)."""
        raw = await self.decide_raw(self.payload(state, questions, model, extra))
        return SystemOneResponse.model_validate(raw, strict=True)

    async def decide_raw(self, body: Mapping[str, Any]) -> dict:
        """POST a ready-made body and return the JSON answer as a dict."""
        return (await self._request("POST", "/v1/systemone", json=body)).json()

    async def models(self) -> list[dict]:
        """The endpoint's `GET /v1/models` entries."""
        return (await self._request("GET", "/v1/models")).json()["models"]

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        started, retry_index = time.monotonic(), 0
        while True:
            response, error = None, None
            try:
                response = await self._http.request(method, path, **kwargs)
            except _TRANSPORT_ERRORS as exc:
                error = exc
            delay = self.after_attempt(retry_index, started, response, error, f"{method} {path}")
            if delay is None:
                return response
            await asyncio.sleep(delay)
            retry_index += 1

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSystemOne:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
