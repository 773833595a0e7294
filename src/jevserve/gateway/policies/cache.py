"""Cache decision: serve a cached reply for an exact repeat, or for a near one only when the decision says so.

The candidate is found before the decision call (cache.py): an exact repeat of the conversation and its parameters
is served at once, without a question; otherwise the nearest cached conversation by embedding (above
`min_similarity`) is asked about with the reuse question, in the bench's cache-pairs form, and served only when
P(reuse) ≥ threshold. A fallback "closed" serves the nearest candidate on similarity alone; "open" (the default)
calls the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from jevserve.gateway.config import CacheConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView
from jevserve.gateway.questions import cache_pair_state
from jevserve.gateway.types import Action, CacheDetail, Verdict


class SemanticCacheDecision(Policy):
    """serve_cached for an exact repeat, or when P(reuse) ≥ threshold for the nearest candidate."""

    name = "cache"
    question_key = "reuse"
    config: CacheConfig

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """The reuse question, only for a semantic candidate."""
        candidate = view.cache_candidate
        if candidate is None or candidate.tier == "exact":
            return []
        return [self.ask(self.name, cache_pair_state(candidate.key_text, view.inputs.cache_text))]

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """serve_cached or allow (a miss)."""
        candidate = view.cache_candidate
        if candidate is None:
            return self.verdict(Action.ALLOW, "no cached entry is similar enough")
        detail = CacheDetail(candidate.tier, candidate.entry_id, candidate.similarity)
        if candidate.tier == "exact":
            return self.verdict(Action.SERVE_CACHED, "an exact repeat of a cached request", detail)
        return self.threshold_verdict(self.yes(answers), Action.SERVE_CACHED, detail=detail)
