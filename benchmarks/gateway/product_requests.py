"""Two products' own requests through the gateway's guard and harm decisions: what each decider refuses of their
ordinary traffic, and what it catches of attacks written for them, at its default operating points.

The operating points are set on the packaged everyday requests (ShareGPT's), so "acts on at most 1 %" is a rate on
those. These requests were written by an outside tester for two products of their own, shown none of the project's
data: a customer-support bot (a 1,000-character persona system prompt, five order tools) and a coding assistant
(shell and file tools), 135 ordinary requests (several of them multi-turn) and 33 attacks (injections, one of them
in a tool result; jailbreaks; harmful requests), all with the products' system prompts and tools. Each is read
through `run_decisions` with the default config (decision timeout 60 s, so no decision falls back) as the gateway
reads it. A request counts as refused when guard or harm is at or over its threshold.

Writes benchmarks/results/gateway_product_requests.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/product_requests.py [--decider SPEC ...]
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from everyday import at_default_points, publish_request_set, rate, refused_by, show, verdict_probabilities

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = ROOT / "benchmarks" / "gateway" / "product_requests.jsonl"
DOC = ROOT / "docs" / "gateway.md"
DECISIONS = ("guard", "harm")
KINDS = ("ordinary", "injection", "jailbreak", "harmful")


def measure(spec: str | None, rows: list[dict]) -> dict:
    decider, resolved, thresholds = at_default_points(spec, DECISIONS)
    probabilities = asyncio.run(verdict_probabilities(decider, resolved, [r["body"] for r in rows], DECISIONS))
    return {"decider": decider.name, "spec": spec or "embedded", "thresholds": thresholds,
            "probabilities": probabilities}  # fmt: skip


def refused(run: dict) -> np.ndarray:
    return refused_by(run["probabilities"], run["thresholds"])


def markdown(result: dict) -> str:
    kinds, products = np.array(result["kinds"]), np.array(result["products"])
    runs = result["runs"]
    lines = [
        "### Two products' own requests (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Requests written by an outside tester for a support bot "
        "and a coding assistant of their own, with their system prompts and tools "
        "(`benchmarks/gateway/product_requests.jsonl`), through the default config's guard and harm at each "
        "decider's own operating points (set on the packaged everyday requests); refused: guard or harm acted. "
        "Ordinary rows: every refusal is a false one; attack rows: every refusal is a catch.",
        "",
        "| requests | " + " | ".join(f"{r['decider']}: refused" for r in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    groups = [(f"ordinary, {p}", (kinds == "ordinary") & (products == p)) for p in ("support", "coding")]
    groups += [("ordinary, all", kinds == "ordinary")]
    groups += [(kind, kinds == kind) for kind in KINDS[1:]] + [("attacks, all", kinds != "ordinary")]
    for name, mask in groups:
        cells = [show(rate(int(refused(run)[mask].sum()), int(mask.sum()))) for run in runs]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for run in runs:
        wrong = np.flatnonzero(refused(run) & (kinds == "ordinary"))
        shown = "; ".join(f"\"{result['texts'][i]}\"" for i in wrong[:4]) or "none"
        points = f"guard {run['thresholds']['guard']:.3f}, harm {run['thresholds']['harm']:.3f}"
        lines.append(f"- {run['decider']} ({points}) refused these ordinary ones: {shown}"
                     f"{' …' if len(wrong) > 4 else ''}.")
    return "\n".join(lines)


def last_user_text(body: dict) -> str:
    for message in reversed(body["messages"]):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return " ".join(message["content"].split())[:90]
    return ""


def main() -> None:
    publish_request_set(__doc__.split("\n\n")[0], "product_requests.py", REQUESTS, "gateway_product_requests", DOC,
                        fields=lambda rows: {"kinds": [r["kind"] for r in rows],
                                             "products": [r["product"] for r in rows],
                                             "texts": [last_user_text(r["body"]) for r in rows]},
                        measure=measure, markdown=markdown)


if __name__ == "__main__":
    main()
