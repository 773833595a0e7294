"""Queue-order policies: which waiting request is admitted next and which running one is preempted.

Every policy ranks requests by a key, smallest first; the preemption victim is the request ranked last, so one
order decides both admission and preemption (as vLLM's priority scheduler does). Ties fall back to arrival time
and then request id, so the order is total and runs are deterministic.

Aging (optional, `aging_s`): a request that has waited `aging_s` seconds since arrival is promoted ahead of every
request not yet promoted, and promoted requests are served first come, first served:

    key(r, now) = (0, arrival_s)              if now - arrival_s >= aging_s   (promoted)
                  (1, size(r), arrival_s)     otherwise

so no request waits much longer than `aging_s` plus the time to drain the promoted requests ahead of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jevserve.serving.errors import MissingPredictionError
from jevserve.serving.types import Request


class _RankedQueue:
    """Shared ranking machinery: a size per request, optional aging and an optional decision delay."""

    name = "base"
    reads_predictions = False  # whether its order reads a request's predicted reply length
    reads_client_priority = False  # whether its order reads vLLM's `priority` field, which only a client sets

    def __init__(self, *, aging_s: float | None = None, decision_delay_s: float = 0.0) -> None:
        if aging_s is not None and not aging_s > 0:
            raise ValueError(f"aging_s={aging_s!r}; expected a number of seconds > 0, or None for no aging")
        if not decision_delay_s >= 0:
            raise ValueError(f"decision_delay_s={decision_delay_s!r}; expected a number of seconds >= 0")
        self.aging_s = aging_s
        self.decision_delay_s = float(decision_delay_s)

    def size(self, request: Request) -> float:
        """The quantity this policy serves smallest first."""
        raise NotImplementedError

    def sort_key(self, request: Request, now_s: float) -> tuple:
        """Smaller keys are admitted first; see the module docstring for the aging rule."""
        if self.aging_s is not None and now_s - request.arrival_s >= self.aging_s:
            return (0, 0.0, request.arrival_s, request.request_id)
        return (1, self.size(request), request.arrival_s, request.request_id)

    def key_valid_until_s(self, request: Request, now_s: float) -> float:
        """The instant from which `sort_key(request, ·)` may differ from its value at now_s (inf: never)."""
        if self.aging_s is not None and now_s - request.arrival_s < self.aging_s:
            return request.arrival_s + self.aging_s
        return math.inf

    def victim(self, candidates: Sequence[Request], now_s: float) -> int:
        """Index of the candidate ranked last, which is preempted first."""
        if not candidates:
            raise ValueError("victim() needs at least one candidate request")
        keys = [self.sort_key(r, now_s) for r in candidates]
        return max(range(len(candidates)), key=keys.__getitem__)

    def get_params(self) -> dict[str, object]:
        """The settings, for result files."""
        return {"name": self.name, "aging_s": self.aging_s, "decision_delay_s": self.decision_delay_s}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(aging_s={self.aging_s!r}, decision_delay_s={self.decision_delay_s!r})"


class FirstComeFirstServed(_RankedQueue):
    """Admit in arrival order; preempt the latest arrival."""

    name = "fcfs"

    def size(self, request: Request) -> float:
        """Every request has the same size, so arrival time decides."""
        return 0.0


class ShortestPromptFirst(_RankedQueue):
    """Admit the request with the fewest prompt tokens first."""

    name = "spf"

    def size(self, request: Request) -> float:
        """The prompt length in tokens."""
        return float(request.num_prompt_tokens)


class PredictedLengthFirst(_RankedQueue):
    """Admit the request with the shortest predicted reply first."""

    name = "plf"
    reads_predictions = True

    def size(self, request: Request) -> float:
        """The predicted reply length in tokens; a request without one is an error, not a silent default."""
        if request.predicted_output_tokens is None:
            raise MissingPredictionError(
                f"request {request.request_id!r} has no predicted_output_tokens; policy {self.name!r} orders by it "
                "(give every request a prediction, e.g. `--predictions FILE`)"
            )
        return float(request.predicted_output_tokens)


class TrueLengthFirst(_RankedQueue):
    """Admit the request with the shortest true reply first (an oracle, as an upper bound)."""

    name = "tlf"

    def size(self, request: Request) -> float:
        """The true reply length in tokens, known only in simulation."""
        if request.num_output_tokens is None:
            raise MissingPredictionError(
                f"request {request.request_id!r} has no num_output_tokens; policy 'tlf' is an oracle and needs "
                "the true reply length"
            )
        return float(request.num_output_tokens)


class PriorityFirst(_RankedQueue):
    """vLLM's `--scheduling-policy priority`: admit the lowest `priority` value first (arrival order among equals);
    preempt the highest value, latest arrival first."""

    name = "priority"
    reads_client_priority = True

    def size(self, request: Request) -> float:
        """The request's priority value (vLLM: lower is served earlier)."""
        return float(request.priority)
