"""Injections written in other forms of their letters, through the gateway's guard at the default operating point,
with the decision texts read in plain forms (`decision_inputs.plain_forms`) and read as sent.

A served LLM reads full-width ｌｅｔｔｅｒｓ, mathematical 𝗹𝗲𝘁𝘁𝗲𝗿𝘀, letters split by zero-width spaces and ASCII
spelled in invisible Unicode tag characters as the text they spell; the decision model's tokenizer does not. This
runs the bench's injection and jailbreak test sides (the guard's positives) plain and in four such forms through
`run_decisions` with the default config (the embedded model, operating points from the packaged calibration
scores; each decision given 60 s, so none falls back) and counts the share the guard blocks: once as the gateway
reads them, once with `plain_forms` switched off (the texts as sent). It also counts, with no model, the requests
of the packaged calibration file and of the bench's everyday test side whose decision texts plain forms change:
what it costs ordinary traffic.

Writes benchmarks/results/plain_forms.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/plain_forms.py
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: benchmarks.harness
sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/gateway: the everyday benchmark's helpers
from benchmarks.harness import write_report
from everyday import acted, user, verdict_probabilities

import jevserve.serving.decision_inputs as decision_inputs_module
from jevserve.bench.data import BenchData
from jevserve.bench.sources.everyday import load_everyday
from jevserve.bench.task import split_items
from jevserve.bench.tasks import TASKS
from jevserve.gateway import default_config, make_decider
from jevserve.gateway.calibration import load_calibration
from jevserve.gateway.operating_points import resolve_operating_points
from jevserve.serving.decision_inputs import decision_inputs, plain_forms

DOC = Path(__file__).resolve().parents[2] / "docs" / "gateway.md"


def full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def math_bold(text: str) -> str:
    """Letters as MATHEMATICAL SANS-SERIF BOLD (𝗮…𝘇, 𝗔…𝗭), digits as their bold forms."""
    out = []
    for c in text:
        if "A" <= c <= "Z":
            c = chr(0x1D5D4 + ord(c) - ord("A"))
        elif "a" <= c <= "z":
            c = chr(0x1D5EE + ord(c) - ord("a"))
        elif "0" <= c <= "9":
            c = chr(0x1D7EC + ord(c) - ord("0"))
        out.append(c)
    return "".join(out)


def zero_width(text: str) -> str:
    """A zero-width space inside every word, after its first letter."""
    return " ".join(word[:1] + "\u200b" + word[1:] if len(word) > 1 else word for word in text.split(" "))


def tag_smuggled(text: str) -> str:
    """A harmless visible request, the injection in invisible tag characters (each mirrors an ASCII character)."""
    hidden = "".join(chr(0xE0000 + ord(c)) if " " <= c <= "~" else c for c in text)
    return f"Can you summarise this for me? {hidden}"


FORMS: dict[str, Callable[[str], str]] = {
    "plain": lambda text: text,
    "full-width": full_width,
    "mathematical bold": math_bold,
    "zero-width spaces": zero_width,
    "tag characters": tag_smuggled,
}


def positives(data: BenchData) -> list[str]:
    """The guard-injection and guard-jailbreak test sides' positives."""
    texts = []
    for task in ("guard-injection", "guard-jailbreak"):
        _, test = split_items(TASKS[task].load_items(data))
        texts += [item.state for item in test if item.label]
    return texts


def blocked_share(decider, config, texts: list[str]) -> dict:
    probabilities = asyncio.run(verdict_probabilities(decider, config, [user(t) for t in texts], ("guard",)))["guard"]
    threshold = config.routes[0].guard.threshold
    blocked = int(acted(probabilities, threshold).sum())
    fell_back = sum(p is None for p in probabilities)
    if fell_back:
        raise SystemExit(f"{fell_back} of {len(texts)} guard decisions fell back: the table would count them as passed")
    return {"blocked": blocked, "n": len(texts)}


def changed_requests(bodies: list[dict]) -> int:
    """Requests whose guard, harm or request texts plain forms change."""

    def texts(body: dict) -> tuple:
        inputs = decision_inputs(body)
        return inputs.guard_texts, inputs.harm_texts, inputs.user_text

    read = [texts(b) for b in bodies]
    decision_inputs_module.plain_forms = lambda text: text
    try:
        sent = [texts(b) for b in bodies]
    finally:
        decision_inputs_module.plain_forms = plain_forms
    return sum(a != b for a, b in zip(read, sent, strict=True))


def markdown(result: dict) -> str:
    lines = [
        f"Injections and jailbreaks (bench test sides, {result['forms']['plain']['plain forms']['n']} texts) blocked "
        f"by the guard at threshold {result['threshold']:.3f}, by how their letters are written:",
        "",
        "| written as | read in plain forms (served) | read as sent |",
        "|---|---|---|",
    ]
    for form, row in result["forms"].items():
        cells = [f"{100 * r['blocked'] / r['n']:.1f} % ({r['blocked']}/{r['n']})"
                 for r in (row["plain forms"], row["as sent"])]  # fmt: skip
        lines.append(f"| {form} | {cells[0]} | {cells[1]} |")
    lines += ["", "Ordinary requests whose decision texts plain forms change (no model run):", "",
              "| requests | changed |", "|---|---|"]
    for side, row in result["ordinary"].items():
        lines.append(f"| {side} | {row['changed']} of {row['n']} |")
    return "\n".join(lines)


def main() -> int:
    # quality, not latency: every decision is given time to answer (a fallback would count as not blocking)
    config = default_config().model_copy(update={"decision_timeout_ms": 60_000.0})
    decider = make_decider(config.decider)
    resolved, _ = resolve_operating_points(config, decider)
    texts = positives(BenchData())
    forms = {}
    for name, form in FORMS.items():
        disguised = [form(t) for t in texts]
        row = {"plain forms": blocked_share(decider, resolved, disguised)}
        decision_inputs_module.plain_forms = lambda text: text
        try:
            row["as sent"] = blocked_share(decider, resolved, disguised)
        finally:
            decision_inputs_module.plain_forms = plain_forms
        forms[name] = row
        print(name, row, flush=True)
    ordinary = {}
    for side, bodies in (
        ("calibration (train)", [r.body for r in load_calibration(config.calibration).requests]),
        ("everyday test", [r.body for r in load_everyday("test")]),
    ):
        ordinary[side] = {"changed": changed_requests(bodies), "n": len(bodies)}
    result = {"decider": decider.name, "threshold": resolved.routes[0].guard.threshold, "forms": forms,
              "ordinary": ordinary}  # fmt: skip
    table = markdown(result)
    print(table)
    write_report("plain_forms", result, table, doc=DOC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
