"""Replica routing policies: which replica takes a request, from a snapshot of every replica.

Each policy is pure: snapshots in, a frozen `Decision(replica_id, reason)` out, ties to the lowest replica id.
Round-robin keeps no counter of its own; it reads how many requests each replica has been sent
(`ReplicaState.num_routed`, kept by the caller), so replaying the same snapshots gives the same decisions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jevserve.serving.errors import ServingError
from jevserve.serving.replica_forward import expected_total_tokens
from jevserve.serving.ttft_estimate import DEFAULT_OUTPUT_TOKENS, ReplicaModel, estimate_ttft
from jevserve.serving.types import Decision, ReplicaState, Request


def _check(replicas: Sequence[ReplicaState]) -> None:
    if not replicas:
        raise ServingError("route() needs at least one replica snapshot; got an empty sequence")


def _models_for(models: Sequence[ReplicaModel], replicas: Sequence[ReplicaState], router: str) -> None:
    for state in replicas:
        if not 0 <= state.replica_id < len(models):
            raise ServingError(
                f"router {router!r}: replica_id={state.replica_id} has no ReplicaModel (models has {len(models)}); "
                "give one model per replica, indexed by replica id"
            )


class RoundRobin:
    """Route to the replica that has been sent the fewest requests, lowest id on ties (cycles 0, 1, ..., n-1)."""

    name = "rr"

    def __init__(self, *, models: Sequence[ReplicaModel] = ()) -> None:
        self.models = tuple(models)  # unused: every router takes the replicas' models, so callers need no branches

    def route(self, request: Request, replicas: Sequence[ReplicaState]) -> Decision:
        """The replica next in turn."""
        _check(replicas)
        best = min(replicas, key=lambda r: (r.num_routed, r.replica_id))
        return Decision(best.replica_id, f"rr: {best.num_routed} routed before")


class JoinShortestQueue:
    """Route to the replica with the fewest queued requests (waiting or in transit), then the fewest running."""

    name = "jsq"

    def __init__(self, *, models: Sequence[ReplicaModel] = ()) -> None:
        self.models = tuple(models)  # unused, as for RoundRobin

    def route(self, request: Request, replicas: Sequence[ReplicaState]) -> Decision:
        """The replica with the shortest queue."""
        _check(replicas)
        best = min(replicas, key=lambda r: (len(r.waiting) + len(r.in_transit), len(r.running), r.replica_id))
        return Decision(best.replica_id, f"jsq: queue {len(best.waiting) + len(best.in_transit)}")


def outstanding_tokens(state: ReplicaState, default_output_tokens: float = DEFAULT_OUTPUT_TOKENS) -> int:
    """Tokens a replica still has to compute: remaining prefill plus expected remaining decode of every request."""
    total = 0
    for r in (*state.running, *state.waiting):
        expected = expected_total_tokens(r.request, r.num_generated_tokens, default_output_tokens)
        total += r.num_remaining_prefill_tokens + expected - r.num_generated_tokens
    for request in state.in_transit:
        total += request.num_prompt_tokens + expected_total_tokens(request, 0, default_output_tokens)
    return total


class LeastOutstandingTokens:
    """Route to the replica with the fewest tokens still to compute (prefill left + predicted decode left), each
    replica's model giving the reply length assumed for requests without a prediction."""

    name = "lot"

    def __init__(self, *, models: Sequence[ReplicaModel] = ()) -> None:
        self.models = tuple(models)

    def _default(self, replica_id: int) -> float:
        return self.models[replica_id].default_output_tokens if replica_id < len(self.models) else DEFAULT_OUTPUT_TOKENS

    def route(self, request: Request, replicas: Sequence[ReplicaState]) -> Decision:
        """The least loaded replica in tokens."""
        _check(replicas)
        loads = [(outstanding_tokens(r, self._default(r.replica_id)), r.replica_id) for r in replicas]
        tokens, replica_id = min(loads)
        return Decision(replica_id, f"lot: {tokens} tokens outstanding")


class LatencyAware:
    """Route to the replica with the smallest estimated TTFT, simulating each replica forward from its snapshot
    with its own step-time model (`estimate_ttft`)."""

    name = "latency"

    def __init__(self, *, models: Sequence[ReplicaModel]) -> None:
        self.models = tuple(models)

    def estimates(self, request: Request, replicas: Sequence[ReplicaState]) -> list[float]:
        """Estimated TTFT (s) of the request on each replica, in the order given."""
        _check(replicas)
        _models_for(self.models, replicas, self.name)
        return [estimate_ttft(request, r, self.models[r.replica_id]) for r in replicas]

    def route(self, request: Request, replicas: Sequence[ReplicaState]) -> Decision:
        """The replica with the smallest estimate."""
        ttfts = self.estimates(request, replicas)
        ttft, replica_id = min(zip(ttfts, (r.replica_id for r in replicas), strict=True))
        return Decision(replica_id, f"latency: estimated TTFT {ttft * 1000:.1f} ms")


class UtilityAware:
    """Among replicas whose estimated TTFT meets the target, route to the one with the highest utility
    (quality - cost_weight x cost, per request); when none meets it, to the smallest estimated TTFT.

    For routing among models of different size and price: a large model scores higher quality at a higher cost
    and a slower step, so it is chosen while it can still answer in time."""

    name = "utility"

    def __init__(
        self,
        *,
        models: Sequence[ReplicaModel],
        qualities: Sequence[float],
        costs: Sequence[float],
        ttft_target_s: float,
        cost_weight: float = 1.0,
    ) -> None:
        if not (len(models) == len(qualities) == len(costs)):
            raise ServingError(
                f"router 'utility': models, qualities and costs have lengths {len(models)}, {len(qualities)}, "
                f"{len(costs)}; expected one of each per replica"
            )
        if not ttft_target_s > 0:
            raise ServingError(f"router 'utility': ttft_target_s={ttft_target_s!r}; expected seconds > 0")
        self.latency = LatencyAware(models=models)
        self.qualities, self.costs = tuple(qualities), tuple(costs)
        self.ttft_target_s, self.cost_weight = ttft_target_s, cost_weight

    def utility(self, replica_id: int) -> float:
        """Quality minus weighted cost of serving one request on this replica."""
        return self.qualities[replica_id] - self.cost_weight * self.costs[replica_id]

    def route(self, request: Request, replicas: Sequence[ReplicaState]) -> Decision:
        """The most useful replica that meets the TTFT target, else the fastest."""
        ttfts = self.latency.estimates(request, replicas)
        ids = [r.replica_id for r in replicas]
        meeting = [(-self.utility(i), t, i) for t, i in zip(ttfts, ids, strict=True) if t <= self.ttft_target_s]
        if meeting:
            neg_utility, ttft, replica_id = min(meeting)
            return Decision(replica_id, f"utility {-neg_utility:.3f}, estimated TTFT {ttft * 1000:.1f} ms")
        ttft, replica_id = min(zip(ttfts, ids, strict=True))
        reason = "no replica meets the TTFT target" if math.isfinite(ttft) else "no replica can admit it"
        return Decision(replica_id, f"utility: {reason}; fastest estimate {ttft * 1000:.1f} ms")
