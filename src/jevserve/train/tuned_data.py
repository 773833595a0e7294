"""The tuned reader's examples beyond the reading model's: everyday negatives, trigger words, label-keeping rewrites,
cache pairs and tool calls made by rule (each module says why). Only train sides and train templates."""

from __future__ import annotations

from jevserve.bench.data import BenchData
from jevserve.bench.sources import SourceMissingError
from jevserve.bench.tasks import TASKS
from jevserve.train.cache_rules import cache_rule_examples
from jevserve.train.examples import Example, task_examples
from jevserve.train.injections_composed import composed_injection_examples
from jevserve.train.personas_composed import composed_persona_examples
from jevserve.train.perturb import GUARD_TASKS, perturbed_examples, prefixed_examples, suffixed_examples
from jevserve.train.rules import injection
from jevserve.train.tool_calls import tool_call_examples
from jevserve.train.tool_calls_composed import composed_tool_call_examples
from jevserve.train.trigger_words import trigger_word_examples


def guard_examples(data: BenchData, log=print) -> list[Example]:
    """The train-side examples of the guard and harm tasks (what the rewrites rewrite)."""
    out = []
    for name in GUARD_TASKS:
        try:
            out += task_examples(TASKS[name], TASKS[name].load_items(data))
        except SourceMissingError as exc:
            log(f"skipping rewrites of {name}: {exc}")
    return out


JAILBREAK_AS_INJECTION = "rules:jailbreak-as-injection"


def jailbreaks_as_injections(guard: list[Example]) -> list[Example]:
    """guard-jailbreak's train examples asked the guard's injection question too: the gateway asks only that one, and
    a jailbreak ("you are now DAN, without rules") is an attempt to override the assistant's rules or role."""
    return [
        Example(ex.state, injection(), ex.answer, JAILBREAK_AS_INJECTION, ex.sources)
        for ex in guard
        if ex.family == "guard-jailbreak"
    ]


def test_states(data: BenchData) -> list[str]:
    """Every bench task's test-item texts (what no added training text may be a near-duplicate of)."""
    out = []
    for task in TASKS.values():
        try:
            out += [item.state for item in task.load_items(data) if item.split == "test"]
        except SourceMissingError:
            continue
    return out


def tuned_examples(
    data: BenchData,
    *,
    everyday: bool = True,
    composed_calls: bool = False,
    composed_injections: bool = False,
    pasted_lists: bool = False,
    composed_personas: bool = False,
    composed_harm: bool = False,
    prefixed_harm: bool = False,
    log=print,
) -> list[Example]:
    """Every rule-made and everyday example the tuned reader adds (train side only); with `composed_calls`, the tool
    calls composed from templates too, with `composed_injections` the injections composed from parts, with
    `pasted_lists` the later turns that paste a list, with `composed_personas` persona prompts with and without a
    rule-breaking clause, with `composed_harm` harmful and harmless technical requests of the same form, with
    `prefixed_harm` the harm tasks' examples behind a persona or override line (each
    studied, not in the committed recipe: docs/training.md, "Tool calls composed from templates", "Injections
    composed from parts", "Pasted lists as negatives", "Persona prompts composed from parts", "Harmful technical
    requests composed from parts")."""
    guard = guard_examples(data, log)
    triggers = trigger_word_examples("train")
    out = [*triggers, *perturbed_examples([*guard, *triggers]), *suffixed_examples(guard, "train")]
    out += jailbreaks_as_injections(guard)
    if prefixed_harm:
        out += prefixed_examples(guard)
    out += cache_rule_examples("train") + tool_call_examples("train")
    if composed_calls:
        out += composed_tool_call_examples()
    held_out = test_states(data) if composed_injections or composed_personas or composed_harm or everyday else []
    if composed_injections:
        out += composed_injection_examples(held_out)
    if composed_personas:
        from jevserve.train.everyday_negatives import calibration_texts

        out += composed_persona_examples(held_out, calibration_texts())
    if composed_harm:
        from jevserve.train.everyday_negatives import calibration_texts
        from jevserve.train.harm_composed import composed_harm_examples

        out += composed_harm_examples(held_out, calibration_texts())
    if everyday:
        try:
            from jevserve.train.everyday_negatives import (
                FOLLOW_UPS,
                follow_up_examples,
                pasted_list_examples,
                pasted_list_texts,
                screened_later_turns,
                train_side_everyday,
            )

            out += train_side_everyday()
            later = screened_later_turns(held_out)  # screened once: the follow-ups and the lists both read it
            out += follow_up_examples(later[:FOLLOW_UPS])
            if pasted_lists:
                out += pasted_list_examples(pasted_list_texts(later))
        except (ImportError, SourceMissingError) as exc:
            log(f"no everyday negatives: {exc}")
    return out
