"""Predicted-length orders with aging that bounds the longest wait without turning the queue back into FCFS.

The plain aging of `queue.py` promotes a request after a fixed `aging_s`; once the engine runs near capacity
almost every request has waited that long, and the queue is FCFS again. The policies here scale each request's
allowance with its *own* expected service time, so short requests keep their lead while a long one still gets
a bound in units of its own length. The expected service time of a request is

    T(r) = predicted_output_tokens(r) x seconds_per_token

(`seconds_per_token` is a decode-time scale, default 30 ms, the simulated engine's mean TPOT near its capacity
in docs/queue-order.md; only `stretch x seconds_per_token` matters to the order).

- `plf-edf` (virtual deadlines): serve the earliest `arrival + stretch x T(r)` first. This *is* linear aging:
  ranking by `predicted - w x waited` with `w = 1 / (stretch x seconds_per_token)` tokens per second orders
  requests exactly as these deadlines do (the `w x now` term is common to all), so the key never changes with
  time. A request is overtaken only by requests whose deadline is earlier than its own, so none that arrives
  after its deadline ever goes first: its wait is bounded by its own deadline plus the work ahead of it then.
- `plf-relage` (relative age threshold): predicted length first, but a request that has waited
  `stretch x T(r)` is promoted ahead of every request not yet promoted; promoted requests go first come, first
  served. Short requests are promoted soon, long ones late, so promotion does not flood the queue.
"""

from __future__ import annotations

import math

from jevserve.serving.queue import PredictedLengthFirst
from jevserve.serving.types import Request

DEFAULT_SECONDS_PER_TOKEN = 0.030
DEFAULT_STRETCH = 1.0


class _OwnTimeAging(PredictedLengthFirst):
    """Predicted length first, with a per-request allowance of `stretch` times its own expected service time."""

    def __init__(
        self,
        *,
        aging_s: float | None = None,
        decision_delay_s: float = 0.0,
        stretch: float = DEFAULT_STRETCH,
        seconds_per_token: float = DEFAULT_SECONDS_PER_TOKEN,
    ) -> None:
        super().__init__(aging_s=aging_s, decision_delay_s=decision_delay_s)
        if not (stretch > 0 and math.isfinite(stretch)):
            raise ValueError(f"stretch={stretch!r}; expected a finite number > 0 (multiples of the own service time)")
        if not (seconds_per_token > 0 and math.isfinite(seconds_per_token)):
            raise ValueError(f"seconds_per_token={seconds_per_token!r}; expected a finite number of seconds > 0")
        self.stretch = float(stretch)
        self.seconds_per_token = float(seconds_per_token)

    def allowance_s(self, request: Request) -> float:
        """How long the request may wait before it outranks newer work: stretch x its expected service time."""
        return self.stretch * self.seconds_per_token * self.size(request)

    def get_params(self) -> dict[str, object]:
        """The settings, for result files."""
        return {**super().get_params(), "stretch": self.stretch, "seconds_per_token": self.seconds_per_token}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(stretch={self.stretch!r}, seconds_per_token={self.seconds_per_token!r}, "
                f"aging_s={self.aging_s!r}, decision_delay_s={self.decision_delay_s!r})")


class VirtualDeadlineFirst(_OwnTimeAging):
    """Earliest virtual deadline (arrival + stretch x own expected service time) first: linear aging."""

    name = "plf-edf"

    def sort_key(self, request: Request, now_s: float) -> tuple:
        """The deadline, then arrival and id; `aging_s`, when set, still promotes as in `queue.py`."""
        if self.aging_s is not None and now_s - request.arrival_s >= self.aging_s:
            return (0, 0.0, request.arrival_s, request.request_id)
        return (1, request.arrival_s + self.allowance_s(request), request.arrival_s, request.request_id)


class RelativeAgingFirst(_OwnTimeAging):
    """Predicted length first; promoted (FCFS among promoted) after waiting stretch x own expected service time."""

    name = "plf-relage"

    def _threshold_s(self, request: Request) -> float:
        own = self.allowance_s(request)
        return own if self.aging_s is None else min(own, self.aging_s)

    def sort_key(self, request: Request, now_s: float) -> tuple:
        """(0, arrival) once promoted, else (1, predicted length, arrival)."""
        if now_s - request.arrival_s >= self._threshold_s(request):
            return (0, 0.0, request.arrival_s, request.request_id)
        return (1, self.size(request), request.arrival_s, request.request_id)

    def key_valid_until_s(self, request: Request, now_s: float) -> float:
        """The promotion instant while the request is not promoted yet; never after."""
        promote_at = request.arrival_s + self._threshold_s(request)
        return promote_at if now_s < promote_at else math.inf
