"""Records of model-written math solutions: annotated first wrong steps, and answers of several models for routing.

Both kinds carry `group = "champ:<problem id>"`, so every solution of one problem, whichever model wrote it, lands in
the same split (ids: see base.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jevserve.bench.sources.base import SplitKeyed, assign_id


@dataclass(frozen=True, slots=True)
class Solution(SplitKeyed):
    """A model's solution to a math problem with its first wrong step marked by a human (None: no mistake)."""

    problem: str  # the problem statement
    reference_answer: str  # the dataset's answer to the problem
    text: str  # the model's full solution
    wrong_span: tuple[int, int] | None  # character offsets [start, end) of the first wrong step in `text`
    model: str  # e.g. "GPT-4", "PaLM 2 Medium"
    prompt_mode: str  # the upstream prompting setting, e.g. "No C w/o H"
    category: str  # the problem's category, e.g. "Combinatorics"
    origin: str
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "solution", self.problem, self.text)

    @property
    def is_correct(self) -> bool:
        """True when the annotator found no mistake in the solution."""
        return self.wrong_span is None

    @property
    def first_wrong_step(self) -> str | None:
        """The text of the first wrong step, or None when there is none."""
        if self.wrong_span is None:
            return None
        start, end = self.wrong_span
        return self.text[start:end]


@dataclass(frozen=True, slots=True)
class ModelAnswer(SplitKeyed):
    """One model's solution and one-sentence final answer to a math problem, next to the reference answer.

    Correctness is not shipped: a task must judge `final_answer` against `reference_answer` itself.
    """

    problem: str
    reference_answer: str
    model: str  # "GPT-3.5", "GPT-4", "GPT-4 Turbo" or "PaLM 2 Medium"
    prompt_mode: str  # e.g. "0-Shot", "5-Shot", "No C w/o H"
    solution: str  # the model's worked solution
    final_answer: str  # the model's one-sentence summary of its answer; "" when the solution hit the length limit
    truncated: bool  # True when the solution was cut at the model's output length limit
    category: str
    origin: str
    group: str = ""
    record_id: str = field(init=False, default="")

    def __post_init__(self) -> None:
        assign_id(self, "model-answer", self.problem, self.model, self.prompt_mode, self.solution)
