"""A streamed reply's tool calls behind Envoy: the reply read in the pieces its body arrives in, which need not end
where an event does, so that its tool calls are judged before any reaches the client.

Events pass as they come until one carries (a piece of) a tool call; from that event on everything is kept back. At
the reply's end the calls are judged whole, as the HTTP relay judges them (streaming.py): when the gate removes
nothing, the kept bytes go out as they came; otherwise each held choice is replayed from the gated reply. A reply that
breaks while calls are kept back (no `[DONE]`, a malformed event) sends none of them. Until then, only an event not
yet complete is kept back: it may be the one with the call.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jevserve.gateway.errors import BlockedError, DeciderUnavailableError
from jevserve.gateway.shapes import sse
from jevserve.gateway.streaming import (
    GateCalls,
    HeldCalls,
    StreamSummary,
    carries_tool_call,
    error_event,
    event_data,
    refusal_event,
)

_LINE_END = re.compile(rb"\r\n|\n|\r")


class CallWatch:
    """One streamed reply read as it passes (see the module docstring)."""

    def __init__(self) -> None:
        self.summary = StreamSummary()
        self.calls = HeldCalls()  # what was sent and what is held, per choice (the bytes are the caller's)
        self.holding = False  # an event carried a tool call: everything from it on is kept back
        self.broken: str | None = None  # a malformed event while calls were held
        self._pending = bytearray()  # the event not yet complete
        self._scanned = 0  # where in it the next line starts
        self._lines: list[bytes] = []  # its complete lines
        self._held = 0  # bytes of complete events kept back

    @property
    def kept(self) -> int:
        """How many of the last bytes read are kept back for now."""
        return self._held + len(self._pending)

    def feed(self, piece: bytes) -> int:
        """Read the next piece of the body; how many of the last bytes read are kept back for now."""
        self._pending += piece
        for event, lines in self._complete_events():
            self._read(lines)
            if self.holding:
                self._held += len(event)
        return self.kept

    def end(self) -> None:
        """The body ended: an event it left without its blank line counts as complete (a client may read it)."""
        if self._pending:
            last = self._pending[self._scanned:]
            lines = [*self._lines, bytes(last)] if last else self._lines
            self._read(lines)
            if self.holding:
                self._held += len(self._pending)
            self._pending.clear()
            self._lines, self._scanned = [], 0

    async def release(self, model: str, gate: GateCalls, trailer: Callable[[], bytes] | None = None) -> bytes | None:
        """Once the reply has ended: what goes out in place of the bytes kept back, None for those bytes as they
        came (no call held, or the gate removed none and has nothing to say). A reply that broke while calls were
        held gets the error event that ends a broken stream instead of them. `trailer()` is what the gate has to say
        after the headers left (a flagged call's comment): the held choices are then replayed with it before
        `[DONE]`, as the HTTP relay sends them."""
        self.end()
        if not self.holding:
            return None
        if self.broken is not None or not self.summary.done:
            reason = self.broken or "upstream closed the stream before [DONE]"
            return error_event(f"{reason}; the tool calls it carried were not sent")
        completion = self.summary.completion(model)
        try:
            gated = await gate(completion)
        except (BlockedError, DeciderUnavailableError) as exc:  # the calls held are not sent, nor [DONE]
            self.summary.refused_status = exc.status_code  # logged and counted as the refusal (binding.close)
            return refusal_event(exc)
        said = trailer() if trailer is not None else b""
        if gated is completion and not said:
            return None
        return b"".join(self.calls.replay(gated)) + said + sse("[DONE]")

    def _complete_events(self) -> list[tuple[bytes, list[bytes]]]:
        """The complete events at the front of what is pending (each with its lines), taken from it."""
        events = []
        buf, pos, start = self._pending, self._scanned, 0
        while (match := _LINE_END.search(buf, pos)) is not None:
            if match.group() == b"\r" and match.end() == len(buf):
                break  # perhaps the first half of \r\n
            line = bytes(buf[pos : match.start()])
            pos = match.end()
            if line:
                self._lines.append(line)
            else:  # a blank line ends the event
                events.append((bytes(buf[start:pos]), self._lines))
                self._lines, start = [], pos
        del buf[:start]
        self._scanned = pos - start
        return events

    def _read(self, lines: list[bytes]) -> None:
        """Fold one event into the summary; it is held when calls are held already or it carries one."""
        payloads, malformed = [], None
        # one payload per event, its `data:` lines joined as the client joins them (comments, names, ids left out)
        data = event_data(line.decode("utf-8", "replace") for line in lines)
        if data is not None and not self.summary.done and self.broken is None:  # after [DONE]: passed as it is
            payload = self.summary.read(data.strip())
            if payload is None and not self.summary.done:
                malformed = self.summary.error  # passed on as it is, unless calls are held
            elif payload is not None:
                payloads.append(payload)
        if not self.holding and any(carries_tool_call(p) for p in payloads):
            self.holding = True
        if self.holding and malformed is not None:
            self.broken = malformed
        for payload in payloads:
            if self.holding:
                self.calls.note_held(payload)
            else:
                self.calls.note_sent(payload)
