"""A backend that forwards decisions to another System One endpoint (hosted models, other servers).

Items about the same state go upstream in one request, with ids that carry no meaning (`q0`, `q1`, …); upstream
answers are read back into probability vectors in option order. Upstream failures become BackendError (502), never
a 5xx blamed on the caller's input; upstream 4xx answers keep their status.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jevserve.client import SystemOne, SystemOneAPIError, SystemOneConnectionError
from jevserve.decide.base import DecisionBackend, DecisionItem, ModelCard
from jevserve.protocol import BackendError, DecisionQuestion, SystemOneError, to_wire
from jevserve.protocol.answers import ChoiceAnswer, NoulAnswer, ScoreAnswer


class UpstreamRejected(SystemOneError):
    """The upstream endpoint refused the request (a 4xx): passed on with its status."""


def probabilities_from_answer(
    question: DecisionQuestion, answer: NoulAnswer | ChoiceAnswer | ScoreAnswer
) -> np.ndarray:
    """Read an upstream answer back into one probability per option, in the question's option order."""
    if isinstance(answer, NoulAnswer):
        return np.array([answer.noul, 1.0 - answer.noul])
    if isinstance(answer, ChoiceAnswer):
        return np.array([answer.probabilities.get(o.label, 0.0) for o in question.options])
    return np.array([answer.probabilities.get(str(i), 0.0) for i in range(question.num_options)])


class RemoteBackend(DecisionBackend):
    """Forwards to `url` with an optional bearer key, asking for `model`."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        model: str = "jev-latest",
        timeout_s: float = 30.0,
        client: SystemOne | None = None,
    ) -> None:
        self.model = model
        self.client = client or SystemOne(url, api_key, timeout_s=timeout_s)
        self.card = ModelCard(
            name=f"remote-{model}", description=f"{model} at {url} (forwarded)", release_date="1970-01-01"
        )

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        """One upstream request per distinct state; answers mapped back to items."""
        by_state: dict[str, list[int]] = {}
        for i, item in enumerate(items):
            by_state.setdefault(item.state, []).append(i)
        results: list[np.ndarray | None] = [None] * len(items)
        for state, indices in by_state.items():
            questions = {f"q{n}": to_wire(items[i].question) for n, i in enumerate(indices)}
            try:
                response = self.client.decide(state, questions, model=self.model)
            except SystemOneAPIError as exc:
                if 400 <= exc.status_code < 500 and exc.status_code not in (408, 429):
                    rejected = UpstreamRejected(f"upstream rejected the request: {exc.message}")
                    rejected.status_code, rejected.error_type = exc.status_code, exc.error_type
                    raise rejected from exc
                raise BackendError(f"upstream error: {exc}") from exc
            except SystemOneConnectionError as exc:
                raise BackendError(f"upstream unreachable: {exc}") from exc
            for n, i in enumerate(indices):
                answer = response.answers.get(f"q{n}")
                if answer is None:
                    raise BackendError(f"upstream answer is missing question q{n}")
                results[i] = probabilities_from_answer(items[i].question, answer)
        return results  # type: ignore[return-value]

    def close(self) -> None:
        """Close the upstream connection pool."""
        self.client.close()
