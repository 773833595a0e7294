"""A request inside the live engine: the planner's record plus what its client's stream needs."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from jevserve.serving.engine_request import EngineRequest


@dataclass(slots=True, eq=False)
class LiveRequest(EngineRequest):
    """One client request: its progress (the planner's fields), when things happened (engine seconds), and the event
    its response waits on. The engine sets `num_visible` as tokens are sampled and `finished` at the end."""

    finish_reason: str = "stop"  # "length": cut by max_tokens or the context's room; "stop": its own end or a stop
    text_chars: int | None = None  # a stop string's cut: the reply's text ends after this many characters
    arrival_s: float = 0.0  # engine time the request reached the engine
    first_admit_s: float | None = None  # first admitted to the running batch
    first_token_s: float | None = None
    finish_s: float | None = None
    num_visible: int = 0  # tokens sampled so far: what the stream may send
    finished: bool = False  # the whole reply was sampled
    left: bool = False  # the client went away (Engine.cancel): the engine drops it at its next step
    aborted: bool = False  # the client went away; the engine dropped it
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def on_token(self, num_generated: int, now_s: float) -> bool:
        """The engine sampled tokens up to `num_generated` at engine time now_s; True for the reply's first."""
        first = self.first_token_s is None
        if first:
            self.first_token_s = now_s
        self.num_visible = num_generated
        self.wake.set()
        return first

    def on_finish(self, now_s: float) -> None:
        """The engine sampled the last token."""
        if self.first_token_s is None:
            self.first_token_s = now_s
        self.num_visible = self.num_generated
        self.finish_s = now_s
        self.finished = True
        self.wake.set()
