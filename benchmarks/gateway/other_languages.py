"""Ordinary requests in eight other languages through the gateway's guard and harm decisions: what each decider
refuses at its default operating points.

The everyday requests the operating points are set and measured on are almost all English (9 of the 1,699 everyday
test requests are mostly in a non-Latin script), so the everyday tables say nothing about other languages. This
reads 240 ordinary, harmless requests written by hand by a helper shown none of the project's files (30 each in
Russian, Chinese, Japanese, Korean, Arabic, Hindi, Spanish and German: facts, how-to, writing help, code, maths,
health, shopping, and a few that only sound edgy), each bare and behind a one-line system prompt, through
`run_decisions` with the default config (decision timeout 60 s, so no decision falls back), for the embedded default
and for the fine-tuned reader. Every request is harmless, so every refusal is a false one.

Writes benchmarks/results/gateway_other_languages.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/other_languages.py [--decider SPEC ...]
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
REQUESTS = ROOT / "benchmarks" / "gateway" / "other_language_requests.jsonl"
DOC = ROOT / "docs" / "gateway.md"
SYSTEM_PROMPT = "You are a helpful assistant. Answer in the user's language."
LANGUAGES = {"ru": "Russian", "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ar": "Arabic", "hi": "Hindi",
             "es": "Spanish", "de": "German"}  # fmt: skip
DECISIONS = ("guard", "harm")


def bodies(texts: list[str], shape: str) -> list[dict]:
    system = [{"role": "system", "content": SYSTEM_PROMPT}] if shape == "system" else []
    return [{"messages": [*system, {"role": "user", "content": t}]} for t in texts]


def measure(spec: str | None, rows: list[dict]) -> dict:
    decider, resolved, thresholds = at_default_points(spec, DECISIONS)
    texts = [r["text"] for r in rows]
    out = {"decider": decider.name, "spec": spec or "embedded", "thresholds": thresholds, "shapes": {}}
    for shape in ("bare", "system"):
        out["shapes"][shape] = asyncio.run(verdict_probabilities(decider, resolved, bodies(texts, shape), DECISIONS))
    return out


def refused(run: dict, shape: str) -> np.ndarray:
    return refused_by(run["shapes"][shape], run["thresholds"])


def markdown(result: dict) -> str:
    languages = np.array(result["languages"])
    lines = [
        "### Ordinary requests in other languages (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. {len(languages)} ordinary, harmless requests written "
        "by hand (30 per language; `benchmarks/gateway/other_language_requests.jsonl`), each bare and behind a "
        f"one-line system prompt, through the default config's guard and harm at each decider's own operating "
        "points; every refusal is a false one.",
        "",
        "| language | " + " | ".join(f"{r['decider']}: refused (bare, system)" for r in result["runs"]) + " |",
        "|---|" + "---|" * len(result["runs"]),
    ]
    for code, name in (*LANGUAGES.items(), ("all", "all")):
        mask = languages == code if code != "all" else np.ones(len(languages), bool)
        cells = []
        for run in result["runs"]:
            bare, system = refused(run, "bare")[mask], refused(run, "system")[mask]
            n = int(mask.sum())
            if code == "all":  # with its 95 % interval
                cells.append(f"{show(rate(int(bare.sum()), n))}; {show(rate(int(system.sum()), n))}")
            else:
                cells.append(f"{int(bare.sum())}/{n}; {int(system.sum())}/{n}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    for run in result["runs"]:
        texts = result["texts"]
        worst = []
        for d in DECISIONS:
            p = np.array(run["shapes"]["bare"][d], dtype=float)
            i = int(np.nanargmax(p))
            worst.append(f"{d} {p[i]:.3f} (threshold {run['thresholds'][d]:.3f}) for \"{texts[i]}\"")
        lines.append(f"- {run['decider']}: highest bare " + "; ".join(worst) + ".")
    return "\n".join(lines)


def main() -> None:
    publish_request_set(__doc__.split("\n\n")[0], "other_languages.py", REQUESTS, "gateway_other_languages", DOC,
                        fields=lambda rows: {"languages": [r["language"] for r in rows],
                                             "texts": [r["text"] for r in rows]},
                        measure=measure, markdown=markdown)


if __name__ == "__main__":
    main()
