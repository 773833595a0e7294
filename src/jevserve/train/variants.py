"""Question variants: the same supervised decisions asked the other ways people write them.

The bench's yes/no questions almost always come with both criteria ("yes: <true criterion>", "no: <false
criterion>") and there are a few dozen of them, so a readout trained on them alone can lean on the criteria and
on recognising each question, and learn little about reading a bare question it has not seen, which is how most
people ask. So each example also appears as

- **bare** (noul with instructions): the instructions with plain "yes"/"no" options, the same answer;
- **swapped** (noul with both criteria): no instructions, the two criteria exchanged between "yes" and "no", the
  answer flipped, so the readout must read which criterion fits rather than which option is named "yes";
- **asked** (noul with both criteria, or choice): bare yes/no questions whose instructions carry the content —
  "Is this true: <criterion>?" for each criterion, and "<instructions> Is it <option>?" for the right option and
  for one wrong option (picked by the state's hash) — which turns every option text in the data (BFCL functions,
  risk areas, chat openings, …) into a question to read.

Variants keep their example's state and sources, so they are train-side exactly when it is (the leak test reads
the same states) and leave-one-task-out drops them with it. Each kind is its own family (`<family>~bare`,
`<family>~swapped`, `<family>~asked`) for the training loss's family balance and the manifest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from jevserve.decide.trained import option_text
from jevserve.protocol import NOUL_LABELS, DecisionOption, DecisionQuestion
from jevserve.train.examples import Example

YES, NO = NOUL_LABELS


def bare_question(instructions: str) -> DecisionQuestion:
    """A yes/no question with instructions only: plain "yes"/"no" options, no criteria."""
    return DecisionQuestion("noul", instructions, (DecisionOption(YES, ""), DecisionOption(NO, "")))


def _bare_noul(example: Example, instructions: str, answer_is_yes: bool, kind: str) -> Example:
    answer = 0 if answer_is_yes else 1
    return Example(example.state, bare_question(instructions), answer, f"{example.family}~{kind}", example.sources)


def bare(example: Example) -> Example:
    """The example's instructions with plain yes/no options."""
    return _bare_noul(example, example.question.instructions, example.answer == 0, "bare")


def swapped(example: Example) -> Example:
    """No instructions; the true criterion now describes "no" and the false one "yes"; the answer flipped."""
    true, false = example.question.options
    options = (DecisionOption(YES, false.description), DecisionOption(NO, true.description))
    return Example(
        example.state,
        DecisionQuestion("noul", "", options),
        1 - example.answer,
        f"{example.family}~swapped",
        example.sources,
    )


def asked(example: Example) -> list[Example]:
    """Bare yes/no questions that carry a criterion or an option in their instructions."""
    question = example.question
    if question.kind == "noul" and all(option.description for option in question.options):
        return [
            _bare_noul(example, f"Is this true: {option.description}?", k == example.answer, "asked")
            for k, option in enumerate(question.options)
        ]
    if question.kind == "choice" and question.num_options >= 2:
        wrong = [k for k in range(question.num_options) if k != example.answer]
        pick = int(hashlib.sha256(example.state.encode("utf-8", "surrogatepass")).hexdigest()[:8], 16)
        out = []
        for k in (example.answer, wrong[pick % len(wrong)]):
            option = question.options[k]
            instructions = f"{question.instructions} Is it {option_text(option.label, option.description)}?"
            out.append(_bare_noul(example, instructions.strip(), k == example.answer, "asked"))
        return out
    return []


def question_variants(examples: Iterable[Example]) -> list[Example]:
    """Every example's variants: bare and swapped for yes/no ones, then asked for yes/no and choice ones."""
    examples = list(examples)
    out = []
    for example in examples:
        question = example.question
        if question.kind != "noul" or not question.instructions:
            continue
        out.append(bare(example))
        if all(option.description for option in question.options):
            out.append(swapped(example))
    for example in examples:
        out += asked(example)
    return out
