"""Judge a CHAMP model's one-sentence final answer against the reference answer, where that can be done by rule.

CHAMP ships no correctness label for its 19,440 answers. This judge only handles references whose answer is a
leading integer ("239", "0 is the only possible value", "900 (i.e., all values)") or a plain Yes/No, and
leaves every other problem out (a formula or a set cannot be matched reliably by rule):

- integer reference: right when that integer is one of the numbers standing alone in the final answer;
- Yes/No reference: right when the final answer says yes (or no) and not the other.

Checked against CHAMP's human first-wrong-step annotations of the same solutions (`champ-steps`, 309 judged):
of 53 solutions the annotators found flawless, the judge calls 52 right; of 256 with a wrong step it calls 106
right (a flawed derivation can still end at the right number, so this is not all judge error). Reproduce with
`python -m jevserve.bench.tasks.champ_judge`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_LEADING_INT = re.compile(r"^(-?\d+)(?=\s|$|\s*\()")
_ARITHMETIC_AFTER = re.compile(r"^-?\d+\s*[/^*+]")
_NUMBER = re.compile(r"(?<![\w./^])-?\d+(?:\.\d+)?(?![\w/^])")
_YES = re.compile(r"\byes\b")
_NO = re.compile(r"\bno\b|\bnot\b|\bcannot\b|\bimpossible\b")


def reference_key(reference: str) -> tuple[str, str] | None:
    """("int", "239") or ("yes/no", "yes") for a reference the judge handles, else None."""
    text = reference.strip()
    match = _LEADING_INT.match(text)
    if match and not _ARITHMETIC_AFTER.match(text):
        return ("int", match.group(1))
    word = text.lower().rstrip(".")
    if word in ("yes", "no"):
        return ("yes/no", word)
    return None


def is_right(key: tuple[str, str], final_answer: str) -> bool:
    """Whether a final answer matches a reference key (see the module docstring)."""
    kind, value = key
    if kind == "yes/no":
        text = final_answer.lower()
        says_yes, says_no = bool(_YES.search(text)), bool(_NO.search(text))
        return says_yes and not says_no if value == "yes" else says_no and not says_yes
    return value in _NUMBER.findall(final_answer.replace(",", ""))


def agreement(solutions: Iterable, answers: Iterable) -> dict[tuple[bool, bool], int]:
    """Counts of (annotators found no mistake, judge says right) over solutions both sources ship."""
    by_setting = {(a.group, a.model, a.prompt_mode): a for a in answers}
    counts: dict[tuple[bool, bool], int] = {}
    for s in solutions:
        key = reference_key(s.reference_answer)
        answer = by_setting.get((s.group, s.model, s.prompt_mode))
        if key is None or answer is None or not answer.final_answer:
            continue
        pair = (s.is_correct, is_right(key, answer.final_answer))
        counts[pair] = counts.get(pair, 0) + 1
    return counts


if __name__ == "__main__":  # pragma: no cover - the check quoted in the docstring
    from jevserve.bench.sources import load_source

    counts = agreement(load_source("champ-steps"), load_source("champ-answers"))
    for (flawless, judged_right), n in sorted(counts.items()):
        annotators = "flawless" if flawless else "wrong step"
        print(f"annotators: {annotators}; judge: {'right' if judged_right else 'wrong'}: {n}")
