"""The seam between the ext_proc protocol and the gateway's decisions: what one HTTP request's decisions say.

The protocol side (`stream.py`) knows body modes, chunks and protobuf messages and nothing of policies; the
decision side implements `Exchange` (one per HTTP request) and `Decisions` (which opens them). The calls come in
this order, each at most once (response_chunk once per piece of the reply's body):

    request(headers, body)          → Forward (let it go upstream, changed) | Respond (answer it from here)
    failed_open(reason)             → Forward | None  (only when request() failed or overran and the server fails open)
    response_headers(status, hdrs)  → ResponseEdit of the reply's headers
    response_body(body)             → ResponseEdit: new body, final headers   (only when Forward.response is HOLD, or
                                      response_headers said `hold_whole`)
                                      | Respond (a reply the decisions cannot judge, answered from here instead)
    response_chunk(piece)           → how many of the last bytes stay back     (HOLD_CALLS: each piece, in order)
    response_release()              → what goes out in their place, or None   (HOLD_CALLS: once, at the end)
    close(end)                      → always, once, however the stream ended (store, log, metrics)
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class ResponsePlan(enum.Enum):
    """How much of the upstream's reply the decisions need to see."""

    PASS = "pass"  # nothing: the reply goes to the client untouched and unread
    OBSERVE = "observe"  # the reply streams through as it comes; its whole body reaches close() (cache, log)
    HOLD = "hold"  # the whole reply is held and may be replaced (tool gate, a reply replayed as a stream)
    # the reply streams through as the decisions let it: all of it until an event carries a tool call, which is kept
    # back with all that follows until the end, judged, and sent or replaced (a live stream on a tool-gated route);
    # its whole body reaches close(), as under OBSERVE
    HOLD_CALLS = "hold_calls"


@dataclass(frozen=True)
class Forward:
    """Let the request go upstream, changed as the decisions say."""

    # request headers added or replaced (decisions, the chosen model, llm-d's headers)
    set_headers: Mapping[str, str] = field(default_factory=dict)
    remove_headers: tuple[str, ...] = ()  # request headers removed
    body: bytes | None = None  # the body sent upstream instead; None: unchanged
    response: ResponsePlan = ResponsePlan.PASS
    response_headers: Mapping[str, str] = field(default_factory=dict)  # added to the client's reply (x-jevserve-*)
    clear_route_cache: bool = True  # headers the routes match on changed: ask the data plane to route again


@dataclass(frozen=True)
class Respond:
    """Answer the client from here; the request never reaches an upstream."""

    status: int  # HTTP status
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)  # content-type included
    details: str = "jevserve"  # why, for the data plane's access log (%RESPONSE_CODE_DETAILS%)


@dataclass(frozen=True)
class ResponseEdit:
    """Changes to the reply: its headers and, for a held reply, its body."""

    set_headers: Mapping[str, str] = field(default_factory=dict)
    remove_headers: tuple[str, ...] = ()
    body: bytes | None = None  # the body the client gets instead of the held reply; None: unchanged
    # from response_headers under HOLD_CALLS: the reply is no event stream after all (an HTML page, JSON from a server
    # that ignores `stream: true`), so hold it whole, as under HOLD: response_body judges it at its end, and may
    # refuse it with its own status where the reply mode still holds the headers
    hold_whole: bool = False


@dataclass(frozen=True)
class StreamEnd:
    """How one ext_proc stream ended, handed to `Exchange.close`."""

    status: int | None  # the status the client got: the reply's, or the immediate reply's; None: no reply was seen
    complete: bool  # the reply's body was seen to its end (or there was none)
    error: str | None = None  # why the stream ended early (cancelled by the data plane, a protocol error)
    response_body: bytes | None = None  # the whole reply body under OBSERVE and HOLD (as the upstream sent it)
    immediate: bool = False  # the request was answered from here (Respond)
    timings_ms: Mapping[str, float] = field(default_factory=dict)  # "decide": time inside request(), ...
    # the request's headers as request() got them: a request the stream refused itself (body too large, decisions
    # unavailable) reaches close() with them, so that it is counted and logged like any other
    request_headers: Mapping[str, str] = field(default_factory=dict)


class Exchange(ABC):
    """One HTTP request's decisions as the ext_proc stream sees them (see the module docstring for the order)."""

    @abstractmethod
    async def request(self, headers: Mapping[str, str], body: bytes) -> Forward | Respond:
        """Decide on the request: its headers (lower-case names, pseudo-headers included) and whole body."""

    def failed_open(self, reason: str) -> Forward | None:
        """When request() failed or ran past the deadline (`reason`) and the server fails open: the changes that
        still follow from the config alone (the route's own model name, which the data plane's routes match); None:
        forward the request unchanged. Also where the decision side counts and logs that it was skipped."""
        return None

    def past_deadline(self, reason: str) -> Respond | None:
        """When request() ran past the deadline (`reason`): an immediate reply in place of failing open or closed,
        where the decision side refuses what it could not decide in time; None (the default): `--failure` decides."""
        return None

    async def response_headers(self, status: int, headers: Mapping[str, str]) -> ResponseEdit:
        """Changes to the reply's headers (default: none)."""
        return ResponseEdit()

    async def response_body(self, body: bytes, *, undecided: str | None = None) -> ResponseEdit | Respond:
        """What the client gets instead of the held reply `body` (default: the reply unchanged). Its headers reach
        the client in BUFFERED and FULL_DUPLEX_STREAMED reply modes; in STREAMED mode the headers went out first.
        A Respond replaces the whole reply, status included (in STREAMED mode only its body can). `undecided`
        (why): asked again after a first call failed or ran past the deadline, to answer without the decider, by
        the decisions' fallbacks; the default raises, and `--failure` decides."""
        if undecided is not None:
            raise NotImplementedError(undecided)
        return ResponseEdit()

    def response_chunk(self, piece: bytes) -> int:
        """Under HOLD_CALLS: read the reply's next piece; how many of the last bytes read (this piece's and earlier
        ones') stay back for now. The rest goes to the client. Default: none stay back."""
        return 0

    async def response_release(self, *, undecided: str | None = None) -> bytes | None:
        """Under HOLD_CALLS, once the reply has ended: what the client gets in place of the bytes still kept back;
        None: those bytes as they came. The reply's status and headers went out before its body. `undecided`: as
        for response_body."""
        if undecided is not None:
            raise NotImplementedError(undecided)
        return None

    async def close(self, end: StreamEnd) -> None:
        """Finish the request's work after its stream ended (store, log); runs outside the stream's lifetime."""
        return None


class Decisions(Protocol):
    """What the ext_proc server serves: a source of per-request exchanges."""

    name: str  # shown in the banner and the health answer

    def open(self) -> Exchange:
        """A fresh exchange for one HTTP request."""
        ...

    async def aclose(self) -> None:
        """Release what the decisions hold (decider, store, log)."""
        ...
