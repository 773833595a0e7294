"""Semantic cache decision: serve the cached answer only when the decision says it fully answers the new request.

The nearest cached conversation (by embedding, above `min_similarity`) is found before the decision call; the
reuse question reads both conversations in the bench's cache-pairs form. A fallback "closed" serves the
candidate on similarity alone; "open" (the default) calls the model.
"""

from __future__ import annotations

from collections.abc import Sequence

from jevserve.gateway.config import CacheConfig
from jevserve.gateway.decider import Ask
from jevserve.gateway.policies.base import Answers, Policy, RequestView, Verdict
from jevserve.gateway.questions import cache_pair_state


class SemanticCacheDecision(Policy):
    """serve_cached when P(reuse) ≥ threshold for the nearest candidate."""

    name = "cache"
    question_key = "reuse"
    config: CacheConfig

    def asks(self, view: RequestView) -> Sequence[Ask]:
        """The reuse question, only when there is a candidate."""
        candidate = view.cache_candidate
        if candidate is None:
            return []
        return [self.ask(self.name, cache_pair_state(candidate.key_text, view.inputs.cache_text))]

    def act(self, view: RequestView, answers: Answers | None) -> Verdict:
        """serve_cached or allow (miss)."""
        candidate = view.cache_candidate
        if candidate is None:
            return Verdict(self.name, "allow", None, None, False, "no cached entry is similar enough")
        return self.threshold_verdict(
            self.yes(answers), "serve_cached", entry_id=candidate.entry_id, similarity=candidate.similarity
        )
