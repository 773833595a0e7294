"""CHAMP (champ-dataset): competition math problems with model solutions, annotated first wrong steps, and the
answers of four models under many prompting settings (for routing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jevserve.bench.sources.base import unique_records
from jevserve.bench.sources.errors import SourceFormatError
from jevserve.bench.sources.packages import CHAMP_DATASET
from jevserve.bench.sources.readers import field_of, read_json
from jevserve.bench.sources.records_math import ModelAnswer, Solution
from jevserve.bench.sources.spec import SourceSpec

CHAMP_FILE = "champ_dataset/dataset_files/v0.json"


def _problems(root: Path) -> tuple[Path, list[dict[str, Any]]]:
    path = root / CHAMP_FILE
    data = read_json(path)
    problems = field_of(data if isinstance(data, dict) else {}, "problems", dict, str(path))
    if not all(isinstance(p, dict) for p in problems.values()):
        raise SourceFormatError(f"{path}: every problem must be a JSON object")
    # Sorted by identifier so the record order never depends on the file's key order.
    return path, [problems[key] for key in sorted(problems)]


def _setting(key: str, where: str) -> tuple[str, str]:
    model, sep, mode = key.partition("|")
    if not sep:
        raise SourceFormatError(f"{where}: key {key!r} is not '<model>|<prompt mode>'")
    return model, mode


def load_steps(root: Path) -> tuple[Solution, ...]:
    """Model solutions with a human-marked first wrong step (character span), or none when the solution is right."""
    path, problems = _problems(root)
    records = []
    for problem in problems:
        problem_id = field_of(problem, "identifier", str, str(path))
        where = f"{path} problem {problem_id}"
        for key, note in sorted(field_of(problem, "fws_annotations", dict, where).items()):
            model, mode = _setting(key, where)
            text = field_of(note, "text", str, f"{where} {key}")
            start, end = note.get("start_idx"), note.get("end_idx")
            if (start is None) != (end is None) or (start is not None and not 0 <= start < end <= len(text)):
                raise SourceFormatError(f"{where} {key}: span ({start}, {end}) does not fit a {len(text)}-char text")
            records.append(
                Solution(
                    problem=field_of(problem, "_text", str, where),
                    reference_answer=field_of(problem, "_answer", str, where),
                    text=text,
                    wrong_span=None if start is None else (start, end),
                    model=model,
                    prompt_mode=mode,
                    category=field_of(problem, "category", str, where),
                    origin=f"champ-steps:{problem_id}:{key}",
                    group=f"champ:{problem_id}",
                )
            )
    return unique_records(records)


def _answer(problem: dict[str, Any], key: str, messages: list[Any], where: str) -> ModelAnswer:
    model, mode = _setting(key, where)
    # Every conversation ends: <model's solution>, user "summarize the answer in one sentence", <model's summary>.
    if len(messages) < 4 or not all(isinstance(m, dict) for m in messages):
        raise SourceFormatError(f"{where}: expected at least 4 messages ending solution, request, summary")
    solution, summary = messages[-3], messages[-1]
    if not str(solution.get("role", "")).startswith("Model.") or not str(summary.get("role", "")).startswith("Model."):
        raise SourceFormatError(f"{where}: the 3rd-last and last messages must come from the model")
    # A solution cut at the length limit has error LENGTH_CURRENT and its summary has no text (LENGTH_PREVIOUS).
    truncated = solution.get("error") == "LENGTH_CURRENT" or summary.get("text") is None
    return ModelAnswer(
        problem=field_of(problem, "_text", str, where),
        reference_answer=field_of(problem, "_answer", str, where),
        model=model,
        prompt_mode=mode,
        solution=field_of(solution, "text", str, where),
        final_answer=str(summary.get("text") or ""),
        truncated=truncated,
        category=field_of(problem, "category", str, where),
        origin=f"champ-answers:{problem['identifier']}:{key}",
        group=f"champ:{problem['identifier']}",
    )


def load_answers(root: Path) -> tuple[ModelAnswer, ...]:
    """Every model's solution and one-sentence answer to every problem, in every prompting setting."""
    path, problems = _problems(root)
    records = []
    for problem in problems:
        problem_id = field_of(problem, "identifier", str, str(path))
        where = f"{path} problem {problem_id}"
        for key, conversation in sorted(field_of(problem, "conversations", dict, where).items()):
            messages = field_of(conversation, "messages", list, f"{where} {key}")
            records.append(_answer(problem, key, messages, f"{where} {key}"))
    return unique_records(records)


SOURCES = (
    SourceSpec(
        name="champ-steps",
        family="verify",
        archive=CHAMP_DATASET,
        files=(CHAMP_FILE,),
        loader=load_steps,
        record_kind="Solution",
        description="model math solutions with the first wrong step marked by hand",
    ),
    SourceSpec(
        name="champ-answers",
        family="route",
        archive=CHAMP_DATASET,
        files=(CHAMP_FILE,),
        loader=load_answers,
        record_kind="ModelAnswer",
        description="answers of 4 models in 18 prompting settings, with reference answers (no correctness label)",
    ),
)
