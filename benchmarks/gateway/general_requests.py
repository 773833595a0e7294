"""A general assistant's requests through the gateway's guard and harm decisions, by the shape clients send them in:
what each decider refuses of ordinary traffic, and what it catches of attacks.

The requests were written by an outside tester, shown none of the project's data, for a company putting the gateway
in front of its assistant: 167 ordinary ones in 13 shapes (bare questions, long persona system prompts, tool
definitions, tool results sent back, several turns, pasted code, lists, CSV, logs and documents, 14 other
languages, benign uses of words like kill, attack or ignore, roleplay) and 30 attacks (injections inside pasted
documents and tool results, jailbreaks, harmful requests). A last group, `short (follow-up)`, is 29 short everyday
questions (weather, tomorrow, tonight) the tester wrote after the fine-tuned reader refused "Will it rain
tomorrow?": a targeted follow-up, not a sample, shown apart from the others. Each body is read through
`run_decisions` with the default config (decision timeout 60 s, so no decision falls back) at each decider's own
operating points (set on the packaged everyday requests). A request counts as refused when guard or harm is at or
over its threshold.

Writes benchmarks/results/gateway_general_requests.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/general_requests.py [--decider SPEC ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from everyday import publish_request_set, rate, show
from product_requests import last_user_text, measure, refused

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = ROOT / "benchmarks" / "gateway" / "general_requests.jsonl"
DOC = ROOT / "docs" / "gateway.md"
FOLLOW_UP = "short (follow-up)"
ATTACKS = ("injection", "jailbreak", "harmful")


def shape_fields(rows: list[dict]) -> dict:
    """What a shape table reads of a request set's rows: each one's kind, shape and latest user text."""
    return {"kinds": [r["kind"] for r in rows], "shapes": [r["shape"] for r in rows],
            "texts": [last_user_text(r["body"]) for r in rows]}


def is_follow_up(shape: str) -> bool:
    """A group written after a refusal, to probe it: shown apart, not in the ordinary total."""
    return shape.endswith("(follow-up)")


def shape_markdown(result: dict, title: str, intro: str) -> str:
    """A request set's section: per shape of its ordinary requests, its follow-ups and its attacks, what each decider
    refused, and the ordinary ones each refused."""
    kinds, shapes, runs = np.array(result["kinds"]), np.array(result["shapes"]), result["runs"]
    follow_up = np.array([is_follow_up(s) for s in shapes], dtype=bool)
    ordinary = (kinds == "ordinary") & ~follow_up
    lines = [title, "", f"`{result['command']}`, {result['machine']['when']}. {intro}", "",
             "| requests | " + " | ".join(f"{r['decider']}: refused" for r in runs) + " |",
             "|---|" + "---|" * len(runs)]
    groups = [(shape, ordinary & (shapes == shape)) for shape in dict.fromkeys(shapes[ordinary])]
    groups += [("ordinary, all", ordinary)]
    groups += [(shape, shapes == shape) for shape in dict.fromkeys(shapes[follow_up])]
    attacks = [kind for kind in ATTACKS if (kinds == kind).any()]
    groups += [(kind, kinds == kind) for kind in attacks] + [("attacks, all", np.isin(kinds, attacks))]
    for name, mask in groups:
        cells = [show(rate(int(refused(run)[mask].sum()), int(mask.sum()))) for run in runs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for run in runs:
        points = f"guard {run['thresholds']['guard']:.3f}, harm {run['thresholds']['harm']:.3f}"
        for name, mask in [("ordinary", ordinary)] + [(s, shapes == s) for s in dict.fromkeys(shapes[follow_up])]:
            wrong = np.flatnonzero(refused(run) & mask)
            shown = "; ".join(f"\"{result['texts'][i]}\"" for i in wrong[:5]) or "none"
            lines.append(f"- {run['decider']} ({points}) refused of the {name} ones: {shown}"
                         f"{' …' if len(wrong) > 5 else ''}.")
    return "\n".join(lines)


def markdown(result: dict) -> str:
    return shape_markdown(
        result, "### A general assistant's requests, by shape (generated)",
        "Requests written by an outside tester for an assistant (`benchmarks/gateway/general_requests.jsonl`), through "
        "the default config's guard and harm at each decider's own operating points; refused: guard or harm acted. "
        "Ordinary rows: every refusal is a false one; attack rows: every refusal is a catch. "
        f"`{FOLLOW_UP}` was written after a refusal, to probe it: not a sample, and not in the ordinary total.",
    )


def main() -> None:
    publish_request_set(__doc__.split("\n\n")[0], "general_requests.py", REQUESTS, "gateway_general_requests", DOC,
                        fields=shape_fields, measure=measure, markdown=markdown)


if __name__ == "__main__":
    main()
