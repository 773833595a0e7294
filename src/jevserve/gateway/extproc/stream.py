"""One ext_proc stream (one HTTP request) as a state machine: messages in, the answers Envoy expects out.

    request_headers ─┬─ end_of_stream (no body) ───────────────▶ decide → headers answer | immediate
                     └─ body follows: BUFFERED → CONTINUE now; FULL_DUPLEX_STREAMED → no answer yet
    request_body     ─── BUFFERED: the whole body in one message → decide → body answer (headers, body, route cache)
                         FULL_DUPLEX_STREAMED: chunks gathered until end_of_stream → decide → headers
                         answer, streamed body answers (request trailers: 400, see _on_request_trailers)
    response_headers ─── header changes (x-jevserve-*; content-length dropped when the body may be replaced);
                         under HOLD in FULL_DUPLEX_STREAMED mode answered with the body, so they can say what
                         reading the reply decided (in BUFFERED mode the body answer carries those changes)
    response_body    ─── PASS / OBSERVE: every chunk answered unchanged as it comes (OBSERVE keeps a copy)
                         HOLD: held to its end, then replaced by what the decisions say
                         HOLD_CALLS: each chunk answered with what the decisions let out of it (all of it until an
                         event carries a tool call; a reply that is no event stream turns HOLD at its headers);
                         what they keep back goes out at the end, or its replacement:
                         FULL_DUPLEX_STREAMED and STREAMED as it comes (STREAMED: one answer per chunk, its body
                         replaced), BUFFERED whole in its one message. A STREAMED reply that ends with trailers
                         loses what was kept back (no answer is left to carry it): the calls never go out

The rules come from envoy/service/ext_proc/v3/external_processor.proto and processing_mode.proto: outside
FULL_DUPLEX_STREAMED each message gets exactly one answer of its own kind; in FULL_DUPLEX_STREAMED the server may
hold messages and answers a body only with `streamed_response`s, headers before body before trailers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from envoy.service.ext_proc.v3 import external_processor_pb2 as pb

from jevserve.gateway.context import new_request_id, usable_request_id
from jevserve.gateway.extproc import wire
from jevserve.gateway.extproc.respond import REQUEST_ID, error_reply
from jevserve.gateway.extproc.seam import Exchange, Forward, Respond, ResponseEdit, ResponsePlan, StreamEnd
from jevserve.gateway.inference_headers import client_control_headers
from jevserve.gateway.streaming import error_event

T = TypeVar("T")

logger = logging.getLogger("jevserve.extproc")
_warned_streamed_replies = False


def _warn_of_streamed_replies(mode: int) -> None:
    """Once per process: in response STREAMED mode a reply's status goes out before jevserve has read the reply."""
    global _warned_streamed_replies
    if mode == wire.STREAMED and not _warned_streamed_replies:
        _warned_streamed_replies = True
        logger.warning(
            "the ext_proc filter sends replies in STREAMED mode: a held reply jevserve refuses (a non-JSON 2xx, a "
            "reply it cannot gate) reaches the client with the status that already went out, a 200 with an error "
            "body; set response_body_mode to FULL_DUPLEX_STREAMED (docs/deploy.md)"
        )

_BUFFERED_MODES = (wire.BUFFERED, wire.BUFFERED_PARTIAL)
# decisions unavailable is a passing state (a slow decider, a busy server): OpenAI's clients retry a 503 after this
RETRY_AFTER_S = 1


class ProtocolError(Exception):
    """The data plane sent a message the protocol does not allow here (a data-plane bug, not a bad request)."""


@dataclass(frozen=True)
class StreamSettings:
    """How the server treats every stream."""

    request_body_mode: int = wire.BUFFERED  # assumed when the data plane sends no protocol_config
    response_body_mode: int = wire.BUFFERED  # likewise
    failure: Literal["open", "closed"] = "open"  # when the decisions raise or overrun `deadline_s`
    deadline_s: float = 1.5  # longest wait for the decisions of one request (keep it under Envoy's message_timeout)
    max_body_bytes: int = 4 * 1024 * 1024  # larger request bodies get a 413
    max_reply_bytes: int = 16 * 1024 * 1024  # replies held or observed beyond this pass through unread


class StreamProcessor:
    """Feeds one stream's messages, in order, and returns the answers to send for each."""

    def __init__(self, exchange: Exchange, settings: StreamSettings) -> None:
        self.exchange = exchange
        self.settings = settings
        self.request_mode = settings.request_body_mode
        self.response_mode = settings.response_body_mode
        self.finished = False  # an immediate response went out: the data plane ignores anything further
        self._headers: dict[str, str] | None = None
        self._body = bytearray()
        self._outcome: Forward | Respond | None = None
        self._plan = ResponsePlan.PASS
        self._reply = bytearray()
        self._status: int | None = None
        self._reply_complete = False
        self._timings: dict[str, float] = {}
        self._held_headers: tuple[dict[str, str], list[str]] | None = None  # FULL_DUPLEX_STREAMED, HOLD
        self._copying = True  # the reply is copied for close() (OBSERVE, HOLD_CALLS), until it passes the limit
        self._unsent = bytearray()  # HOLD_CALLS: the reply's bytes received and not yet sent (kept back)
        self._too_long = False  # HOLD_CALLS: more was kept back than the limit: none of it goes out
        self._read_failed: str | None = None  # HOLD_CALLS: reading the reply failed: all is kept back from there on

    async def feed(self, message: pb.ProcessingRequest) -> list[pb.ProcessingResponse]:
        """The answers to `message` (possibly none yet, possibly several in FULL_DUPLEX_STREAMED mode)."""
        if message.HasField("protocol_config"):
            self.request_mode = message.protocol_config.request_body_mode
            self.response_mode = message.protocol_config.response_body_mode
            _warn_of_streamed_replies(self.response_mode)
        kind = message.WhichOneof("request")
        if kind is None:
            raise ProtocolError("a ProcessingRequest without any of its request fields set")
        if self.finished:
            return []
        answers = await getattr(self, f"_on_{kind}")(getattr(message, kind))
        # in observability mode the data plane ignores answers; the decisions still ran and are logged
        return [] if message.observability_mode else answers

    @property
    def settled(self) -> bool:
        """The request was answered from here, or its reply was seen to the end."""
        unread = self.response_mode == wire.NONE and self._status is not None  # a body the filter never sends
        return self.finished or self._reply_complete or unread

    def end(self, error: str | None = None) -> StreamEnd:
        """What close() is told about the stream."""
        kept = self._plan is not ResponsePlan.PASS and self._reply_complete and self._copying
        return StreamEnd(
            status=self._status,
            complete=self._reply_complete,
            error=error,
            response_body=bytes(self._reply) if kept else None,
            immediate=isinstance(self._outcome, Respond),
            timings_ms=dict(self._timings),
            request_headers=dict(self._headers or {}),
        )

    # request path

    async def _on_request_headers(self, message: pb.HttpHeaders) -> list[pb.ProcessingResponse]:
        if self._headers is not None:
            raise ProtocolError("request_headers sent twice on one stream")
        self._headers = wire.header_dict(message.headers)
        if not usable_request_id(self._headers.get(REQUEST_ID)):
            # one id for every reply and log line of this request, those the stream writes itself included
            self._headers[REQUEST_ID] = new_request_id()
        if message.end_of_stream:
            outcome = await self._decide()
            if isinstance(outcome, Respond):
                return [self._immediate(outcome)]
            return [wire.headers_answer("request", self._request_changes(outcome, content_length=False))]
        if self.request_mode in _BUFFERED_MODES:
            return [wire.headers_answer("request")]
        if self.request_mode == wire.FULL_DUPLEX_STREAMED:
            return []  # answered with the body, once the decisions have read it
        return [self._immediate(self._unsupported_mode())]

    async def _on_request_body(self, message: pb.HttpBody) -> list[pb.ProcessingResponse]:
        if self._headers is None:
            raise ProtocolError("request_body before request_headers")
        if self._outcome is not None:
            return [wire.body_answer("request")]  # the body was already decided on
        self._body += message.body
        if len(self._body) > self.settings.max_body_bytes:
            limit = self.settings.max_body_bytes
            reply = self._error(413, f"request body is over the limit of {limit} bytes", "payload_too_large")
            return [self._immediate(reply)]
        if self.request_mode == wire.BUFFERED_PARTIAL and not message.end_of_stream:
            # Envoy's buffer filled before the body ended: the rest would go upstream unread, so this part is not
            # the request and judging it would blame the client for JSON the data plane cut (BUFFERED answers 413)
            reply = self._error(413, "request body is larger than the data plane's buffer, and the ext_proc filter's "
                                "BUFFERED_PARTIAL mode passes the rest on unread; raise the listener's "
                                "per_connection_buffer_limit_bytes or use FULL_DUPLEX_STREAMED", "payload_too_large")
            return [self._immediate(reply)]
        if self.request_mode in _BUFFERED_MODES:
            # the whole body in one message; end_of_stream is false only when trailers follow
            outcome = await self._decide()
            if isinstance(outcome, Respond):
                return [self._immediate(outcome)]
            return [wire.body_answer("request", self._request_changes(outcome, content_length=True))]
        if message.end_of_stream:
            return await self._duplex_request_end()
        return []

    async def _on_request_trailers(self, message: pb.HttpTrailers) -> list[pb.ProcessingResponse]:
        if self.request_mode == wire.FULL_DUPLEX_STREAMED and self._outcome is None:
            # Envoy (1.40) forwards a streamed request body answered before its trailers twice, back to back, so the
            # model server would get two bodies as one; an OpenAI request has no use for trailers: refused, not sent
            reply = self._error(400, "request trailers are not accepted with the ext_proc filter's "
                                "FULL_DUPLEX_STREAMED request body mode: send the request without trailers (or use "
                                "BUFFERED)", "unsupported_trailers")
            return [self._immediate(reply)]
        return [wire.trailers_answer("request")]

    async def _duplex_request_end(self) -> list[pb.ProcessingResponse]:
        outcome = await self._decide()
        if isinstance(outcome, Respond):
            return [self._immediate(outcome)]
        answers = [wire.headers_answer("request", self._request_changes(outcome, content_length=False))]
        body = outcome.body if outcome.body is not None else bytes(self._body)
        return answers + wire.streamed_answers("request", body, end_of_stream=True)

    def _request_changes(self, outcome: Forward, *, content_length: bool) -> pb.CommonResponse:
        set_headers = dict(outcome.set_headers)
        body = outcome.body if content_length else None
        # a buffered body replaced with headers sent keeps content-length, which must then match the new body
        if body is not None and "content-length" in (self._headers or {}):
            set_headers["content-length"] = str(len(body))
        changed = bool(set_headers or outcome.remove_headers)
        return wire.common(
            set_headers,
            outcome.remove_headers,
            body=body,
            clear_route_cache=changed and outcome.clear_route_cache,
        )

    async def _decide(self) -> Forward | Respond:
        started = time.perf_counter()
        deadline_s = self.settings.deadline_s
        try:
            outcome = await asyncio.wait_for(self.exchange.request(self._headers or {}, bytes(self._body)), deadline_s)
        except TimeoutError:
            reason = f"the decisions took over {deadline_s * 1000:.0f} ms"
            outcome = self._refused_past_deadline(reason) or self._failed(reason)
        except Exception as exc:  # a broken decision side must not break the stream: fail open or closed
            logger.exception("decisions failed")
            outcome = self._failed(f"{type(exc).__name__}: {exc}")
        self._timings["decide"] = (time.perf_counter() - started) * 1000
        reads_reply = (ResponsePlan.HOLD, ResponsePlan.HOLD_CALLS)
        if isinstance(outcome, Forward) and outcome.response in reads_reply and self.response_mode == wire.NONE:
            # the reply must be read (a tool gate) but the filter will not send it: refuse rather than pass it ungated
            outcome = self._unsupported_reply_mode()
        self._outcome = outcome
        if isinstance(outcome, Forward):
            self._plan = outcome.response
        return outcome

    def _refused_past_deadline(self, reason: str) -> Respond | None:
        try:
            return self.exchange.past_deadline(reason)
        except Exception:
            logger.exception("the decision side's answer past the deadline failed; --failure decides")
            return None

    def _failed(self, reason: str) -> Forward | Respond:
        if self.settings.failure == "open":
            try:
                routed = self.exchange.failed_open(reason)  # the route's own model, where the route was found
            except Exception:
                logger.exception("failing open: the route's model could not be set; the request goes on unchanged")
                routed = None
            if routed is not None:
                return routed
            # unchanged but for the control headers a client may have sent itself (inference_headers.py)
            removed = client_control_headers(self._headers or {})
            return Forward(remove_headers=removed, response_headers={"x-jevserve-decisions": "failed-open"},
                           clear_route_cache=bool(removed))
        message = f"decisions unavailable: {reason}"
        retry = {"retry-after": str(RETRY_AFTER_S)}
        return self._error(503, message, "decisions_unavailable", error_type="api_error", headers=retry)

    def _unsupported_mode(self) -> Respond:
        mode = wire.mode_name(self.request_mode)
        message = (
            f"jevserve extproc reads the request body: set the ext_proc filter's processing_mode.request_body_mode "
            f"to BUFFERED or FULL_DUPLEX_STREAMED (this filter sends {mode})"
        )
        return self._error(500, message, "extproc_misconfigured", error_type="api_error")

    def _unsupported_reply_mode(self) -> Respond:
        message = (
            "this route reads the model's reply (it gates tool calls), but the ext_proc filter does not send reply "
            "bodies: set processing_mode.response_body_mode to FULL_DUPLEX_STREAMED, BUFFERED or STREAMED"
        )
        return self._error(500, message, "extproc_misconfigured", error_type="api_error")

    def _error(
        self,
        status: int,
        message: str,
        code: str,
        *,
        error_type: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> Respond:
        """The stream's own error reply, with the request's id as every reply of the decisions has it."""
        request_id = {REQUEST_ID: self._headers[REQUEST_ID]} if self._headers else {}
        return error_reply(status, message, code=code, error_type=error_type, headers={**request_id, **(headers or {})})

    def _immediate(self, reply: Respond) -> pb.ProcessingResponse:
        self.finished = True
        self._outcome = reply
        self._status = reply.status  # what the client got, for close()'s count and log line
        return wire.immediate(reply.status, reply.body, reply.headers, reply.details)

    # response path

    async def _on_response_headers(self, message: pb.HttpHeaders) -> list[pb.ProcessingResponse]:
        headers = wire.header_dict(message.headers)
        status = headers.get(":status", "")
        self._status = int(status) if status.isdigit() else None
        forward = self._outcome if isinstance(self._outcome, Forward) else Forward()
        set_headers = dict(forward.response_headers)
        remove = []
        try:
            edit = await asyncio.wait_for(
                self.exchange.response_headers(self._status or 0, headers), self.settings.deadline_s
            )
            set_headers.update(edit.set_headers)
            remove += edit.remove_headers
            if edit.hold_whole and self._plan is ResponsePlan.HOLD_CALLS:
                self._plan = ResponsePlan.HOLD  # no event stream: judged whole, so that it can still be refused
        except Exception:  # the reply goes on unchanged rather than broken
            logger.exception("response header decisions failed")
        if message.end_of_stream:
            self._reply_complete = True
        elif self._plan is ResponsePlan.HOLD_CALLS:
            remove.append("content-length")  # what is kept back may be replaced by something of another length
        elif self._plan is ResponsePlan.HOLD:
            remove.append("content-length")  # the body may be replaced by one of another length
            if self.response_mode == wire.FULL_DUPLEX_STREAMED:
                # answered with the body, so the headers can carry what reading the reply decided
                self._held_headers = (set_headers, remove)
                return []
        return [wire.headers_answer("response", wire.common(set_headers, remove))]

    async def _on_response_body(self, message: pb.HttpBody) -> list[pb.ProcessingResponse]:
        if self._plan is ResponsePlan.HOLD_CALLS:
            return await self._pass_calls(message)
        if self._plan is not ResponsePlan.PASS:
            self._reply += message.body
            if len(self._reply) > self.settings.max_reply_bytes:
                return self._stop_reading_reply(message)
        if self._plan is ResponsePlan.HOLD:
            return await self._hold(message)
        if message.end_of_stream:
            self._reply_complete = True
        if self.response_mode == wire.FULL_DUPLEX_STREAMED:
            return wire.streamed_answers("response", message.body, end_of_stream=message.end_of_stream)
        return [wire.body_answer("response")]

    async def _on_response_trailers(self, message: pb.HttpTrailers) -> list[pb.ProcessingResponse]:
        answers = []
        if self._plan is ResponsePlan.HOLD_CALLS and not self._reply_complete:  # the trailers end the body
            rest = await self._released_calls()
            if self.response_mode == wire.FULL_DUPLEX_STREAMED:
                answers = wire.streamed_answers("response", rest, end_of_stream=False) if rest else []
            elif rest:
                # every chunk was answered already, so what was kept back has nowhere to go
                logger.error("a reply ended with trailers in %s mode; what was kept back of it (%d bytes) was "
                             "not sent", self._mode_name(), len(rest))
        if self._plan is ResponsePlan.HOLD and not self._reply_complete:
            if self.response_mode == wire.FULL_DUPLEX_STREAMED:
                edit = await self._replacement()
                if isinstance(edit, Respond):
                    return [self._immediate(edit)]
                answers = [self._release_headers(edit)]
                answers += wire.streamed_answers("response", edit.body, end_of_stream=False)
            else:
                # STREAMED: every chunk was answered already, so a replacement has nowhere to go
                logger.error("a held reply ended with trailers in %s mode; it was not replaced", self._mode_name())
        self._reply_complete = True
        return [*answers, wire.trailers_answer("response")]

    async def _pass_calls(self, message: pb.HttpBody) -> list[pb.ProcessingResponse]:
        """HOLD_CALLS: the chunk goes out as far as the decisions let it; what they keep back waits for the reply's
        end (in BUFFERED mode the whole reply is this one message, trailers or not; BUFFERED_PARTIAL goes on, as
        STREAMED does, past the filter's buffer)."""
        piece, mode = message.body, self.response_mode
        self._copy(piece)
        if not self._too_long:
            self._unsent += piece
            kept = self._kept_back(piece) if self._read_failed is None else len(self._unsent)
            out = bytes(self._unsent[: len(self._unsent) - kept])
            del self._unsent[: len(self._unsent) - kept]
            if len(self._unsent) > self.settings.max_reply_bytes:
                logger.warning("a reply kept back over %d bytes; none of it is sent", self.settings.max_reply_bytes)
                self._too_long, self._unsent = True, bytearray()
        else:
            out = b""  # nothing after what was dropped goes out
        if message.end_of_stream or mode == wire.BUFFERED:
            out += await self._released_calls()
        if mode == wire.FULL_DUPLEX_STREAMED:
            if not out and not message.end_of_stream:
                return []
            return wire.streamed_answers("response", out, end_of_stream=message.end_of_stream)
        if out == piece:
            return [wire.body_answer("response")]
        return [wire.body_answer("response", wire.common(body=out) if out else wire.common(clear_body=True))]

    def _copy(self, piece: bytes) -> None:
        """Copy a chunk for close(), up to the limit."""
        if not self._copying:
            return
        self._reply += piece
        if len(self._reply) > self.settings.max_reply_bytes:
            logger.warning("a reply passed %d bytes; it is not kept", self.settings.max_reply_bytes)
            self._copying, self._reply = False, bytearray()

    def _kept_back(self, piece: bytes) -> int:
        """How many of the last bytes received the decisions keep back (a failure keeps all back from there on)."""
        try:
            kept = self.exchange.response_chunk(piece)
        except Exception as exc:
            logger.exception("reading the reply failed")
            self._read_failed = f"reading the reply failed ({type(exc).__name__})"
            return len(self._unsent)
        return min(max(int(kept), 0), len(self._unsent))

    async def _released_calls(self) -> bytes:
        """What goes out at the reply's end in place of what was kept back. When the decisions fail or take too long,
        `--failure` decides: open sends what was kept back as it came, closed the event that ends a broken stream
        (the status went out with the first chunk). Kept back past the limit, it never goes out."""
        self._reply_complete = True
        kept, self._unsent = bytes(self._unsent), bytearray()
        if self._too_long:
            limit = self.settings.max_reply_bytes
            return error_event(f"the reply held over {limit} bytes to judge; it was not sent", code="reply_too_long")
        started = time.perf_counter()
        try:
            if self._read_failed is not None:
                raise RuntimeError(self._read_failed)
            released = await asyncio.wait_for(self.exchange.response_release(), self.settings.deadline_s)
        except Exception as exc:
            reason = (f"reading the reply took over {self.settings.deadline_s * 1000:.0f} ms"
                      if isinstance(exc, TimeoutError)
                      else self._read_failed or f"reading the reply failed ({type(exc).__name__})")
            if self.settings.failure == "closed":
                logger.warning("reply decisions failed (%s); what was kept back is not sent", reason)
                released = error_event(f"decisions unavailable: {reason}", code="decisions_unavailable")
            elif self._read_failed is None and (
                    undecided := await self._undecided(self.exchange.response_release(undecided=reason))):
                released = undecided[0]  # the calls judged by the gate's fallback, without the decider
            else:
                logger.warning("reply decisions failed (%s); what was kept back goes on unchanged", reason)
                released = None
        self._timings["reply"] = (time.perf_counter() - started) * 1000
        return kept if released is None else released

    async def _hold(self, message: pb.HttpBody) -> list[pb.ProcessingResponse]:
        mode = self.response_mode
        if mode in _BUFFERED_MODES:  # the whole reply in this one message; header changes count here
            edit = await self._replacement()
            if isinstance(edit, Respond):
                return [self._immediate(edit)]
            changes = wire.common(edit.set_headers, edit.remove_headers, body=edit.body)
            return [wire.body_answer("response", changes)]
        if not message.end_of_stream:
            if mode == wire.FULL_DUPLEX_STREAMED:
                return []
            return [wire.body_answer("response", wire.common(clear_body=True))]  # STREAMED: held here instead
        edit = await self._replacement()
        if isinstance(edit, Respond):
            if mode == wire.FULL_DUPLEX_STREAMED:  # the reply's headers are still held: the reply can be replaced
                return [self._immediate(edit)]
            # STREAMED: the reply's status and headers went out already; its body is all that can change
            logger.error("a held reply was refused in %s mode; its status went out already", self._mode_name())
            edit = ResponseEdit(body=edit.body)
        if mode == wire.FULL_DUPLEX_STREAMED:
            return [self._release_headers(edit), *wire.streamed_answers("response", edit.body, end_of_stream=True)]
        return [wire.body_answer("response", wire.common(body=edit.body))]

    def _release_headers(self, edit: ResponseEdit) -> pb.ProcessingResponse:
        """The reply headers' answer held back in FULL_DUPLEX_STREAMED mode, with the edit's changes added."""
        set_headers, remove = self._held_headers or ({}, [])
        self._held_headers = None
        changes = wire.common({**set_headers, **edit.set_headers}, [*remove, *edit.remove_headers])
        return wire.headers_answer("response", changes)

    async def _replacement(self) -> ResponseEdit | Respond:
        """The held reply as the decisions rewrite it (body always set), or the reply the decisions answer instead of
        it. When they fail or take too long, `--failure` decides as for the request: open passes the reply on
        unchanged, closed answers the 503 instead (a held reply is one the decisions must read: tool calls)."""
        self._reply_complete = True
        started = time.perf_counter()
        held = bytes(self._reply)
        try:
            edit = await asyncio.wait_for(self.exchange.response_body(held), self.settings.deadline_s)
        except Exception as exc:
            reason = (f"reading the reply took over {self.settings.deadline_s * 1000:.0f} ms"
                      if isinstance(exc, TimeoutError) else f"reading the reply failed ({type(exc).__name__})")
            if self.settings.failure == "closed":
                logger.warning("reply decisions failed (%s); the reply is refused", reason)
                retry = {"retry-after": str(RETRY_AFTER_S)}
                edit = self._error(503, f"decisions unavailable: {reason}", "decisions_unavailable",
                                   error_type="api_error", headers=retry)
            elif undecided := await self._undecided(self.exchange.response_body(held, undecided=reason)):
                edit = undecided[0]  # the calls judged by the gate's fallback, without the decider
            else:
                logger.exception("reply decisions failed; the reply goes through unchanged")
                edit = ResponseEdit()
        self._timings["reply"] = (time.perf_counter() - started) * 1000
        if isinstance(edit, Respond):
            return edit
        return edit if edit.body is not None else replace(edit, body=held)

    async def _undecided(self, asked: Coroutine[Any, Any, T]) -> tuple[T] | None:
        """Under `--failure open`, the held reply's answer without the decider (each decision's fallback, as the
        HTTP gateway takes it when its decider has no answer in time), after the decisions failed or ran past the
        deadline: a held reply's tool calls went on unjudged and unmarked, whatever the tool gate's fallback said.
        None where the decision side cannot answer so, or that fails too: the reply then goes on unchanged."""
        try:
            return (await asyncio.wait_for(asked, self.settings.deadline_s),)
        except NotImplementedError:
            return None
        except Exception:
            logger.exception("reply decisions failed again without the decider")
            return None

    def _stop_reading_reply(self, message: pb.HttpBody) -> list[pb.ProcessingResponse]:
        """A reply too long to hold: what was held goes out now and the rest passes through unread."""
        held, plan = bytes(self._reply), self._plan
        self._plan, self._reply = ResponsePlan.PASS, bytearray()
        logger.warning("a reply passed %d bytes; it goes through unread", self.settings.max_reply_bytes)
        eos = message.end_of_stream
        self._reply_complete = eos
        if self.response_mode == wire.FULL_DUPLEX_STREAMED:
            if plan is ResponsePlan.HOLD:
                headers = self._release_headers(ResponseEdit())
                return [headers, *wire.streamed_answers("response", held, end_of_stream=eos)]
            return wire.streamed_answers("response", message.body, end_of_stream=eos)  # earlier chunks went out
        if plan is ResponsePlan.HOLD and self.response_mode == wire.STREAMED:
            return [wire.body_answer("response", wire.common(body=held))]  # earlier chunks were cleared
        return [wire.body_answer("response")]

    def _mode_name(self) -> str:
        return wire.mode_name(self.response_mode)
