"""What a causal LM reads for a question, and which answer tokens its options are read from.

An item is read as two text segments, each tokenized on its own so the state's tokens never depend on the question
(that is what lets every question about a state share the state's keys and values):

    Text:                                   <- state segment (BOS first when the tokenizer adds one)
    Hi, I was charged twice ...
                                            <- blank line ends the state segment
    Question: Which team should handle this ticket?
    Options:
    A. Billing: Payments, invoices, refunds
    B. Technical
    Answer with the letter of one option.
    Answer:                                 <- question segment ends here; the answer follows

An option's probability is the model's probability of its answer tokens after the prompt, renormalised over the
options. The readout rule depends only on the question and the tokenizer, never on other questions:

- **label** readout: the answers are the labels " A", " B", … (a choice of at most 26 options), " 0"…" 9" (a score)
  or " yes"/" no" (a noul), used when every label encodes to one token and the tokens are distinct. This is the
  next-token distribution at "Answer:", restricted to the labels.
- **name** readout otherwise: each option's answer is its name (choice), level number (score) or yes/no (noul) with a
  newline that closes it, scored by teacher-forced likelihood. The newline keeps a name that is a prefix of another
  ("Billing" vs "Billing team") from winning by stopping early.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from jevserve.protocol import DecisionQuestion

Readout = Literal["label", "name"]
Encode = Callable[[str], Sequence[int]]

LETTERS = string.ascii_uppercase
# The end of the question segment; the answer's first token is predicted from its last token.
ANSWER_CUE = "Answer:"
# Used when a question has no instructions (a noul may come with criteria only).
DEFAULT_INSTRUCTIONS = {
    "noul": "Does the text fit the description?",
    "choice": "Which option fits the text best?",
    "score": "Which level fits the text best?",
}


@dataclass(frozen=True, slots=True)
class QuestionPlan:
    """A question as token ids: the prompt after the state, and the answer tokens each option is read from."""

    readout: Readout
    prompt_ids: tuple[int, ...]  # the question segment; its last token predicts each answer's first token
    answer_ids: tuple[tuple[int, ...], ...]  # per option, in option order: the tokens whose likelihood is its score

    @property
    def num_input_tokens(self) -> int:
        """Tokens fed to the model for this question: the prompt and each answer but its last token."""
        return len(self.prompt_ids) + sum(len(a) - 1 for a in self.answer_ids)

    @property
    def num_positions(self) -> int:
        """Positions the question occupies after the state, for the context-window check."""
        return len(self.prompt_ids) + max(len(a) for a in self.answer_ids) - 1


def state_text(state: str) -> str:
    """The state segment the model reads first."""
    return f"Text:\n{state}\n\n"


def labels(question: DecisionQuestion) -> tuple[str, ...] | None:
    """The short labels a label readout would use, or None when the question has too many options for them."""
    n = question.num_options
    if question.kind == "noul":
        return ("yes", "no")
    if question.kind == "score":
        return tuple(str(i) for i in range(n)) if n <= 10 else None
    return tuple(LETTERS[:n]) if n <= len(LETTERS) else None


def question_text(question: DecisionQuestion, readout: Readout) -> str:
    """The question segment: instructions, the options as the readout lists them, and the answer cue."""
    instructions = question.instructions or DEFAULT_INSTRUCTIONS[question.kind]
    lines = [f"Question: {instructions}"]
    if question.kind == "noul":
        yes, no = question.options
        if yes.description:
            lines.append(f"Answer yes if: {yes.description}")
        if no.description:
            lines.append(f"Answer no if: {no.description}")
        lines.append("Answer yes or no.")
    elif question.kind == "score":
        top = question.num_options - 1
        lines.append(f"Levels, from lowest (0) to highest ({top}):")
        lines += [f"{i}. {option.label}" for i, option in enumerate(question.options)]
        lines.append("Answer with the number of one level.")
    else:
        lines.append("Options:")
        for i, option in enumerate(question.options):
            head = f"{LETTERS[i]}." if readout == "label" else "-"
            tail = f": {option.description}" if option.description else ""
            lines.append(f"{head} {option.label}{tail}")
        lines.append("Answer with the letter of one option." if readout == "label" else "Answer with one option name.")
    lines.append(ANSWER_CUE)
    return "\n".join(lines)


def name_answers(question: DecisionQuestion) -> tuple[str, ...]:
    """The answer texts of a name readout: option names, level numbers or yes/no, each closed by a newline."""
    if question.kind == "choice":
        return tuple(f" {option.label}\n" for option in question.options)
    if question.kind == "noul":
        return (" yes\n", " no\n")
    return tuple(f" {i}\n" for i in range(question.num_options))


def plan_question(question: DecisionQuestion, encode: Encode) -> QuestionPlan:
    """Choose the readout for a question (label when its labels are distinct single tokens) and tokenize it."""
    short = labels(question)
    if short is not None:
        label_ids = tuple(tuple(encode(f" {label}")) for label in short)
        if all(len(ids) == 1 for ids in label_ids) and len(set(label_ids)) == len(label_ids):
            return QuestionPlan("label", tuple(encode(question_text(question, "label"))), label_ids)
    answers = tuple(tuple(encode(text)) for text in name_answers(question))
    return QuestionPlan("name", tuple(encode(question_text(question, "name"))), answers)
