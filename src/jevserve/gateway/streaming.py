"""Relaying an upstream's SSE stream: pass events through, collect the reply for the cache, end cleanly on errors.

An upstream that fails mid-stream (connection cut, timeout, malformed event) ends the client's stream with one
`data: {"error": {...}}` event, which the `openai` client raises as an APIError; the stream never hangs.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from jevserve.gateway.errors import BlockedError, DeciderUnavailableError, GatewayError
from jevserve.gateway.responses import CLIENT_CLOSED
from jevserve.gateway.shapes import REASONING_FIELDS, chat_completion, sse
from jevserve.protocol import strict_json

logger = logging.getLogger("jevserve.gateway")


@dataclass
class ChoiceSummary:
    """What a stream carried for one choice (`index`): a request with `n` > 1 gets several."""

    text: list[str] = field(default_factory=list)  # content deltas
    reasoning: dict[str, list[str]] = field(default_factory=dict)  # reasoning deltas, by the field that carried them
    logprobs: list[Any] | None = None  # the chunks' `logprobs.content` entries, joined (None: no chunk had any)
    finish_reason: str | None = None
    tool_call_deltas: list[Any] = field(default_factory=list)  # tool-call deltas, as sent
    function_call: dict[str, str] | None = None  # the legacy functions API's call, its name and arguments joined


@dataclass
class StreamSummary:
    """What a relayed stream carried, filled in as it goes."""

    choices: dict[int, ChoiceSummary] = field(default_factory=dict)  # by choice index, in order of first chunk
    usage: dict[str, Any] | None = None
    error: str | None = None
    done: bool = False  # the upstream sent [DONE]
    header: dict[str, Any] = field(default_factory=dict)  # the chunks' `id`, `created` and `model`, as first sent
    client_left: bool = False  # the client closed its connection before the stream ended
    upstream_broke: bool = False  # the upstream broke off, stalled, ended before [DONE] or sent no JSON
    # the status of a refusal a decision made after the stream's 200 went out (a tool call its request forced,
    # blocked: streaming.refusal_event), logged and counted as what the client was told, as a whole reply's 400 is
    refused_status: int | None = None

    @property
    def upstream_healthy(self) -> bool | None:
        """Whether the stream counts for the upstream's circuit: False when the upstream broke it; None (neither) when
        its client left first; else True, an error event included (the model's answer about this request, as a 500
        is: counted, one client's prompt the model fails on would open the circuit for everyone)."""
        if self.upstream_broke:
            return False
        return None if self.client_left else True

    @property
    def status(self) -> int:
        """200 for a stream that ended with [DONE] and no error event; a decision's refusal's own status; 499 when
        the client left before it ended (a cancelled stream is no upstream failure); else 502."""
        if self.refused_status is not None:
            return self.refused_status
        if self.done and self.error is None:
            return 200
        return CLIENT_CLOSED if self.client_left else 502

    def completion(self, model: str) -> dict[str, Any]:
        """What the stream carried as one chat completion, every choice it sent by index (finish_reason None unless
        it ended cleanly), as the upstream named it: its chunks' id, created and model (`model` only when they named
        none). `usage` is the upstream's usage chunk, or None when it sent none (no `stream_options.include_usage`):
        never invented."""
        completion = chat_completion(model, "")
        completion.update(self.header)
        completion["choices"] = [self._choice(index, self.choices[index]) for index in sorted(self.choices)] or [
            self._choice(0, ChoiceSummary())]
        completion["usage"] = self.usage
        return completion

    def _choice(self, index: int, choice: ChoiceSummary) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(choice.text)}
        for name, pieces in choice.reasoning.items():
            message[name] = "".join(pieces)
        if choice.tool_call_deltas:
            message["tool_calls"] = merged_tool_calls(choice.tool_call_deltas)
        if choice.function_call is not None:
            message["function_call"] = dict(choice.function_call)
        whole = {"index": index, "message": message,
                 "finish_reason": choice.finish_reason if self.status == 200 else None}
        if choice.logprobs is not None:
            whole["logprobs"] = {"content": list(choice.logprobs)}
        return whole

    def observe(self, payload: dict[str, Any]) -> None:
        """Fold one chunk into the summary."""
        for key in ("id", "created", "model"):
            value = payload.get(key)
            if key not in self.header and type(value) is (int if key == "created" else str):
                self.header[key] = value
        if payload.get("usage"):
            self.usage = payload["usage"]
        for choice in payload.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                continue  # not a choice a client could be served; the relay passes the chunk on as it is
            into = self.choices.setdefault(index, ChoiceSummary())
            delta = choice.get("delta") or {}
            if delta.get("content"):
                into.text.append(delta["content"])
            for name in REASONING_FIELDS:
                if isinstance(delta.get(name), str) and delta[name]:
                    into.reasoning.setdefault(name, []).append(delta[name])
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict) and isinstance(logprobs.get("content"), list):
                if into.logprobs is None:
                    into.logprobs = []
                into.logprobs.extend(logprobs["content"])
            if delta.get("tool_calls"):
                into.tool_call_deltas.extend(delta["tool_calls"])
            legacy = delta.get("function_call")
            if isinstance(legacy, dict):  # sent in pieces, as content is: the name first, the arguments after
                call = into.function_call = into.function_call or {"name": "", "arguments": ""}
                for key in ("name", "arguments"):
                    if isinstance(legacy.get(key), str):
                        call[key] += legacy[key]
            if choice.get("finish_reason"):
                into.finish_reason = choice["finish_reason"]

    def read(self, data: str) -> Any:
        """Fold one event's data (the text after `data:`) into the summary; its JSON payload, or None for `[DONE]`
        (which sets `done`) and for a malformed event (which sets `error`)."""
        if data == "[DONE]":
            self.done = True
            return None
        try:
            payload = strict_json.loads(data)  # an event with NaN or 1e400 in it could not be sent on as JSON
        except ValueError:
            # described, never quoted: a held tool call the gate has not judged must not reach the client in it
            self.error = f"upstream sent a malformed event ({len(data):,} characters that are no JSON value)"
            self.upstream_broke = True
            return None
        if isinstance(payload, dict):
            if payload.get("error"):
                self.error = str(payload["error"])[:500]
            self.observe(payload)
        return payload


def merged_tool_calls(deltas: list[Any]) -> list[dict[str, Any]]:
    """The calls a stream's tool-call deltas spell: OpenAI and vLLM send a call's id, type and name in its first delta
    and its arguments in pieces after, all under the call's `index`; the pieces are joined in order. A delta without
    an index is a call of its own."""
    calls: dict[Any, dict[str, Any]] = {}
    for position, delta in enumerate(deltas):
        if not isinstance(delta, dict):
            continue
        index = delta.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else ("alone", position)
        call = calls.setdefault(key, {"type": "function", "function": {"name": "", "arguments": ""}})
        for field_name in ("id", "type"):
            if isinstance(delta.get(field_name), str):
                call[field_name] = delta[field_name]
        function = delta.get("function")
        if isinstance(function, dict):
            for part in ("name", "arguments"):
                if isinstance(function.get(part), str):
                    call["function"][part] += function[part]
    return list(calls.values())


# An event stream's lines end at CR LF, LF or CR, and nowhere else: str.splitlines (and httpx's aiter_lines) also end
# a line at U+2028, U+2029, U+0085 and others, which vLLM writes unescaped inside a chunk's JSON, so a reply holding
# one had its event cut in two and the client's stream ended with an error.
_EVENT_LINE_END = re.compile(r"\r\n|\r|\n")


def event_lines(text: str) -> list[str]:
    """The lines of an event stream's text."""
    return _EVENT_LINE_END.split(text)


async def stream_event_lines(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """The lines of an event stream as its text arrives in chunks (a CR at a chunk's end may begin a CR LF)."""
    rest = ""
    async for chunk in chunks:
        text = rest + chunk
        cr_at_end = text.endswith("\r")
        *lines, rest = event_lines(text[:-1] if cr_at_end else text)
        rest += "\r" if cr_at_end else ""
        for line in lines:
            yield line
    if rest:
        yield rest.removesuffix("\r")


def event_data(lines: Iterable[str]) -> str | None:
    """An event's data, as the SSE format (and the openai client) reads it: its `data:` lines, one leading space off
    each, joined by newlines; None for an event with none (a comment, an id). A payload a server splits over several
    `data:` lines is one payload: read line by line, its pieces were each malformed, and passed unjudged."""
    pieces = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
    return "\n".join(pieces) if pieces else None


async def stream_event_data(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each event of a stream as its text arrives (an event ends at a blank line, or at the end)."""
    lines: list[str] = []
    async for line in stream_event_lines(chunks):
        if line:
            lines.append(line)
            continue
        data, lines = event_data(lines), []
        if data is not None:
            yield data
    data = event_data(lines)
    if data is not None:
        yield data


def summarise(events: bytes) -> StreamSummary:
    """What a whole stream carried, from its bytes (the ext_proc server sees a relayed stream as it passes)."""
    summary = StreamSummary()
    lines: list[str] = []
    for line in [*event_lines(events.decode("utf-8", "replace")), ""]:
        if line:
            lines.append(line)
            continue
        data, lines = event_data(lines), []
        if data is not None:
            payload = summary.read(data.strip())
            if summary.done or (payload is None and summary.error is not None):
                break
    return summary


def error_event(message: str, *, code: str = "upstream_stream_error") -> bytes:
    """The event that ends a broken stream."""
    return sse({"error": {"message": message, "type": "upstream_error", "param": None, "code": code}})


def refusal_event(exc: GatewayError) -> bytes:
    """The event that ends a stream a decision refused after its 200 went out (a tool call its request forced,
    blocked): the error body the client would have had as a status, which the openai client raises as it reads."""
    return sse(exc.body())


def carries_tool_call(payload: Any) -> bool:
    """Whether a chunk carries (a piece of) a tool call or a legacy function call in any choice."""
    if not isinstance(payload, dict) or not isinstance(payload.get("choices"), list):
        return False
    for choice in payload["choices"]:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if isinstance(delta, dict) and (delta.get("tool_calls") or delta.get("function_call")):
            return True
    return False


GateCalls = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass
class HeldCalls:
    """The events a relay keeps back from the first tool-call chunk on, so that the calls are judged whole before
    any reaches the client (the tool gate); `sent` counts the content characters of each choice already relayed.
    The HTTP relay holds the events here; the ext_proc server keeps the bytes as they came and only notes the chunks
    (extproc/calls.py)."""

    events: list[bytes] = field(default_factory=list)
    choices: set[int] = field(default_factory=set)  # the choices that have events held
    usage: dict[str, Any] | None = None  # a usage chunk held with them (sent last)
    sent: dict[int, int] = field(default_factory=dict)
    # the same for each reasoning field (`reasoning_content`, `reasoning`), by choice
    sent_reasoning: dict[tuple[int, str], int] = field(default_factory=dict)

    def note_sent(self, payload: Any) -> None:
        """Count the content and reasoning a relayed chunk carried."""
        choices = payload.get("choices") if isinstance(payload, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            index = choice.get("index", 0)
            if isinstance(delta.get("content"), str):
                self.sent[index] = self.sent.get(index, 0) + len(delta["content"])
            for name in REASONING_FIELDS:
                if isinstance(delta.get(name), str):
                    key = (index, name)
                    self.sent_reasoning[key] = self.sent_reasoning.get(key, 0) + len(delta[name])

    def hold(self, payload: Any) -> None:
        """Keep a chunk back."""
        self.events.append(sse(payload))
        self.note_held(payload)

    def note_held(self, payload: Any) -> None:
        """Count a chunk kept back (by whoever keeps its bytes): its choices, and a usage chunk."""
        choices = payload.get("choices") if isinstance(payload, dict) else None
        for choice in choices if isinstance(choices, list) else ():
            if isinstance(choice, dict) and isinstance(choice.get("index", 0), int):
                self.choices.add(choice.get("index", 0))
        if isinstance(payload, dict) and payload.get("usage") and not payload.get("choices"):
            self.usage = payload

    async def release(self, summary: StreamSummary, model: str, gate: GateCalls) -> list[bytes]:
        """The held events when the gate blocks nothing; else the held choices replayed from the gated reply."""
        completion = summary.completion(model)
        gated = await gate(completion)
        return self.events if gated is completion else self.replay(gated)

    def replay(self, gated: dict[str, Any]) -> list[bytes]:
        """Each held choice replayed from the gated reply: the content it had not yet sent (the gate's note
        included), the calls it kept, its finish reason; then the held usage chunk."""
        base = {"object": "chat.completion.chunk", **{k: gated.get(k) for k in ("id", "created", "model")}}
        events = []
        for choice in gated["choices"]:
            index = choice.get("index", 0)
            if index not in self.choices:
                continue
            message = choice.get("message") or {}
            delta: dict[str, Any] = {}
            for name in REASONING_FIELDS:  # reasoning the model wrote after its first call, not yet sent
                after = (message.get(name) or "")[self.sent_reasoning.get((index, name), 0):]
                if after:
                    delta[name] = after
            rest = (message.get("content") or "")[self.sent.get(index, 0):]
            if rest:
                delta["content"] = rest
            if message.get("tool_calls"):
                delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])]
            if message.get("function_call"):
                delta["function_call"] = message["function_call"]
            events.append(sse({**base, "choices": [
                {"index": index, "delta": delta, "finish_reason": choice.get("finish_reason")}]}))
        if self.usage is not None:
            events.append(sse(self.usage))
        return events


# Stream ends still running after their relay was cancelled, each referenced until done (a task nobody holds can be
# collected mid-way).
_ENDS_LEFT_RUNNING: set[asyncio.Task] = set()


async def _end_even_if_cancelled(end: Awaitable[None]) -> None:
    """Run a stream's end (the upstream's slot given back, the reply stored, the log line and counts) to completion
    even when the relay is cancelled. A client that closes at [DONE], as the openai client does, or mid-stream makes
    Starlette cancel the relay, and in a cancelled scope every await is cancelled again: an end that waits on a
    shared store (Redis) stopped at its first round trip and left no trace. The end goes on as a task of its own."""
    task = asyncio.ensure_future(end)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        _ENDS_LEFT_RUNNING.add(task)
        task.add_done_callback(_ended_alone)
        raise


def _ended_alone(task: asyncio.Task) -> None:
    _ENDS_LEFT_RUNNING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("a stream's end failed after its client left", exc_info=task.exception())


async def relay(
    response: httpx.Response,
    summary: StreamSummary,
    on_end: Callable[[StreamSummary], Awaitable[None]],
    *,
    gate_calls: GateCalls | None = None,
    model: str = "",
    trailer: Callable[[], bytes] | None = None,
) -> AsyncIterator[bytes]:
    """Yield the upstream's events as they come; `on_end` runs once, however the stream ends. With `gate_calls`
    (a tool gate on the route), the events from the first tool-call chunk on are held until the stream ends, the
    reply's calls are judged whole by `gate_calls` (the reply as one completion → the reply with blocked calls
    removed), and what it keeps is sent, then `trailer()` (what the gate has to say after the headers left); a
    stream that breaks while calls are held sends none of them."""
    events = 0
    held: HeldCalls | None = None
    tracking = HeldCalls() if gate_calls is not None else None  # content sent before any hold
    try:
        async for data in stream_event_data(response.aiter_text()):  # comments and event names are re-framed below
            events += 1
            payload = summary.read(data.strip())
            if summary.done:
                if held is not None and gate_calls is not None:
                    try:
                        released = await held.release(summary, model, gate_calls)
                    except (BlockedError, DeciderUnavailableError) as exc:  # the calls held are not sent, nor [DONE]
                        summary.refused_status = exc.status_code
                        yield refusal_event(exc)
                        break
                    for event in released:
                        yield event
                    if trailer is not None and (said := trailer()):
                        yield said
                yield sse("[DONE]")
                break
            if payload is None and summary.error is not None:  # malformed
                yield error_event(summary.error)
                return
            if tracking is not None and held is None and carries_tool_call(payload):
                held = tracking
            if held is not None:
                held.hold(payload)
                continue
            if tracking is not None:
                tracking.note_sent(payload)
            yield sse(payload)
        else:
            if not summary.done and summary.error is None:
                summary.upstream_broke = True
                summary.error = "upstream closed the stream before [DONE]" if events else (
                    "upstream answered a streaming request without any event (content-type "
                    f"{response.headers.get('content-type', 'none')}): check that it supports stream: true"
                )
                yield error_event(summary.error)
    except httpx.HTTPError as exc:
        # the log keeps the library's words; the client gets what happened (they named a transfer-length "400")
        summary.error = f"upstream stream failed: {type(exc).__name__} {exc}".strip()
        summary.upstream_broke = True
        logger.warning("%s", summary.error)  # the details, kept where the decision log is off too
        broke = "sent nothing within its timeout" if isinstance(exc, httpx.TimeoutException) else "broke off"
        yield error_event(f"upstream stream failed: the upstream {broke} before the stream ended")
    except (asyncio.CancelledError, GeneratorExit):
        # the front end stops the relay when its client goes away (Starlette cancels a streaming response whose
        # client disconnected): counted as the client's 499, not as the upstream's 502
        summary.client_left = True
        raise
    finally:
        await _end_even_if_cancelled(on_end(summary))
