"""Builders shared by tests: a deterministic fake backend and request bodies."""

from __future__ import annotations

import functools
import hashlib
import threading
import time
from collections.abc import Sequence

import numpy as np

from jevserve.decide.base import DecisionBackend, DecisionItem, ModelCard
from jevserve.protocol import DecisionQuestion


def _seed(state: str, question: DecisionQuestion) -> int:
    text = repr((state, question.kind, question.instructions, [(o.label, o.description) for o in question.options]))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


class FakeBackend(DecisionBackend):
    """Probabilities that are a pure function of (state, question); optionally slow or failing on a marker."""

    def __init__(self, name: str = "fake-1", *, delay_s: float = 0.0, fail_on: str | None = None) -> None:
        self.card = ModelCard(name=name, description="deterministic test backend", release_date="2026-01-01")
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.batches: list[int] = []
        self.seen_states: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.num_started = 0  # decide() calls entered, including ones still blocked on `release`

    def decide(self, items: Sequence[DecisionItem]) -> list[np.ndarray]:
        self.num_started += 1
        self.release.wait(10)
        if self.delay_s:
            time.sleep(self.delay_s)
        self.batches.append(len(items))
        out = []
        for item in items:
            self.seen_states.append(item.state)
            if self.fail_on is not None and self.fail_on in item.state:
                raise RuntimeError("backend failure on marked state")
            rng = np.random.default_rng(_seed(item.state, item.question))
            logits = rng.normal(size=item.question.num_options)
            p = np.exp(logits - logits.max())
            out.append(p / p.sum())
        return out


def ticket_body(**extra: object) -> dict:
    """The contract's example request: a noul, a 3-option choice and a 3-level score about a ticket."""
    body = {
        "model": "jev-latest",
        "state": "Hi, I was charged twice for my March invoice and want my money back.",
        "questions": {
            "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
            "team": {
                "type": "choice",
                "instructions": "Which team should handle this ticket?",
                "criteria": {"Billing": "Payments, invoices, refunds", "Technical": None, "Sales": "Pricing"},
            },
            "anger": {
                "type": "score",
                "instructions": "How frustrated is the customer?",
                "criteria": ["Calm", "Frustrated", "Very angry"],
            },
        },
    }
    body.update(extra)
    return body


@functools.cache
def embedded_backends() -> tuple[DecisionBackend, ...]:
    """The real embedded model, loaded once per test session (its ONNX graph is built on first use)."""
    from jevserve.decide.embedded import embedded_backends as load

    return tuple(load())
