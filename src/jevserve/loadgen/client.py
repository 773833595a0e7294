"""Send one request to an OpenAI-compatible server and time its stream: first token, every token chunk, the end.

Definitions follow `vllm bench serve`: TTFT is the first chunk with content after the request was sent; ITL the
gaps between successive content chunks; end-to-end latency until the stream ends; output tokens from the usage the
server reports (`stream_options.include_usage`), else the number of content chunks. Any HTTP error status, an error
event in the stream, a broken or malformed stream, or a timeout makes the request a failure with its reason; nothing
is dropped.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import aiohttp

from jevserve.loadgen.workload import PlannedRequest

NOT_SENT = "not sent"  # the error of a request the replay was interrupted before sending; not a failure
INTERRUPTED_ERROR = "interrupted"  # a sent request the replay stopped before it completed (Ctrl-C)


@dataclass(slots=True)
class RequestResult:
    """What happened to one request (seconds of wall time, before any speedup is undone)."""

    request_id: str
    send_s: float  # wall seconds after the start of the replay
    sent: bool = False  # False: the replay was interrupted before its send time (or before a concurrency slot)
    ok: bool = False
    # why it did not complete: "http 500", "timeout", "server error: ...", "stream: ...", "interrupted", NOT_SENT
    error: str | None = None
    ttft_s: float | None = None
    e2el_s: float | None = None
    itls_s: list[float] = field(default_factory=list)
    num_output_tokens: int = 0
    num_prompt_tokens: int | None = None
    planned_s: float | None = None  # when it was due (wall seconds after the start): later sends waited for a slot
    ended_s: float | None = None  # wall seconds after its send when it ended, completed or failed (None: cut off)
    cut_s: float | None = None  # wall seconds after its send when the replay cut it off (Ctrl-C), unfinished


def request_body(request: PlannedRequest, *, model: str, chat: bool, ignore_eos: bool) -> dict:
    """The JSON body of a streamed request."""
    body: dict = {"model": model, "max_tokens": request.max_tokens, "stream": True,
                  "stream_options": {"include_usage": True}}
    if ignore_eos:
        body["ignore_eos"] = True
    if chat:
        body["messages"] = [{"role": "user", "content": request.prompt}]
    else:
        body["prompt"] = request.prompt
    return body


def _content(chunk: dict) -> str:
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    choice = choices[0]
    delta = choice.get("delta")
    return (delta.get("content") or "") if isinstance(delta, dict) else (choice.get("text") or "")


def _error_text(body: bytes) -> str:
    """": MESSAGE" of an error body in the OpenAI shape (or vLLM's older one, or FastAPI's `{"detail": ...}`), ""
    for any other body: a 400 says
    what was wrong with the request, which the failure count should say too."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    message = _stream_error(parsed) if isinstance(parsed, dict) else None
    if message is None and isinstance(parsed, dict) and isinstance(parsed.get("detail"), str):
        message = parsed["detail"][:200]  # FastAPI's shape, which vLLM answers a path it does not serve with
    return f": {message}" if message else ""


def _stream_error(chunk: dict) -> str | None:
    """The message of an error event (`{"error": {"message": ...}}`, or vLLM's older `{"object": "error",
    "message": ...}`), None for a data chunk."""
    error = chunk if chunk.get("object") == "error" else chunk.get("error")
    if error is None:
        return None
    message = error.get("message") if isinstance(error, dict) else error
    return str(message or "error event without a message")[:200]  # a reason, not a dump: failures group by it


async def send(session: aiohttp.ClientSession, url: str, body: dict, result: RequestResult, *,
               timeout_s: float, started: float) -> RequestResult:
    """Send `body`, read its stream into `result` and return it; failures are recorded, never raised."""
    sent = time.perf_counter()
    result.send_s = sent - started
    result.sent = True
    await _exchange(session, url, body, result, timeout_s=timeout_s, sent=sent)
    result.ended_s = time.perf_counter() - sent  # not reached when the replay is cut off (cancelled)
    return result


async def _exchange(session: aiohttp.ClientSession, url: str, body: dict, result: RequestResult, *,
                    timeout_s: float, sent: float) -> None:
    last = None
    chunks = 0
    counted = False  # the server's usage was read
    try:
        async with asyncio.timeout(timeout_s):
            async with session.post(url, json=body) as response:
                if response.status != 200:
                    result.error = f"http {response.status}" + _error_text(await response.read())
                    return
                async for raw in response.content:
                    line = raw.decode("utf-8").strip()
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = json.loads(data)
                    if not isinstance(chunk, dict):
                        result.error = "stream: not a JSON object"
                        return
                    if (message := _stream_error(chunk)) is not None:
                        result.error = f"server error: {message}"  # the server gave up on the request mid-stream
                        return
                    if chunk.get("usage"):
                        result.num_output_tokens = chunk["usage"].get("completion_tokens", 0)
                        result.num_prompt_tokens = chunk["usage"].get("prompt_tokens")
                        counted = True
                    if _content(chunk):
                        now = time.perf_counter()
                        if last is None:
                            result.ttft_s = now - sent
                        else:
                            result.itls_s.append(now - last)
                        last = now
                        chunks += 1
                        if not counted:  # so far, for a request cut off before the usage (Ctrl-C): its chunks
                            result.num_output_tokens = chunks
        result.e2el_s = time.perf_counter() - sent
        if result.ttft_s is None:
            result.error = "stream: no content"
            return
        result.num_output_tokens = result.num_output_tokens or chunks
        result.ok = True
    except TimeoutError:
        result.error = "timeout"
    except (aiohttp.ClientError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        result.error = f"stream: {type(exc).__name__}"
