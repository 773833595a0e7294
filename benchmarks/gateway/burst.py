"""A burst of long requests at the gateway's decision call: how many are answered within the decision timeout, with
the decider turning away at once what it cannot answer in time (admission) and without (every request queued).

Each request is a pasted text of 60 sentences (about 5.5 KB, so the guard reads it whole and in 8 windows and harm
reads its first 512 word pieces), all different, N sent at once through `run_decisions` with the default config and
the embedded decider, several rounds per N. Without admission every request is queued and the decider answers them
in turn, so under a burst the later ones miss the 1 s deadline after their work was done (with
`on_decision_timeout: reject`, a 429 after a second). With it (Batcher.decide's `budget_s`), a request whose work,
with the work queued before it, would not fit 0.8 of the deadline is turned away before anything is computed for it.
The arms alternate round by round on the same warm decider (admission off: the headroom set to infinity, nothing
turned away), so both see the same machine in the same minutes.

Writes benchmarks/results/gateway_burst.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/burst.py [--rounds 3] [--sizes 4,8,16,32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers

from _serverbench import ROOT, machine, publish
from jevserve.decide import batcher as batcher_module
from jevserve.gateway import default_config, make_decider
from jevserve.gateway.decisions import run_decisions
from jevserve.gateway.operating_points import resolve_operating_points

DOC = ROOT / "docs" / "gateway.md"
ARMS = ("queued", "admission")


def text(tag: str, i: int) -> str:
    tag = f"{tag}-{i}"  # every text new: the decider keeps what it read, and a repeat costs nothing
    return "Please read this carefully. " + " ".join(
        f"Sentence {k} of the pasted text {tag} explains a detail about gardening, soil, water and light."
        for k in range(60)
    )


async def burst(config, decider, n: int, tag: str) -> dict:
    async def one(i: int) -> tuple[bool, float]:
        started = time.perf_counter()
        report = await run_decisions([{"role": "user", "content": text(tag, i)}], config=config, decider=decider)
        return report.error is None, time.perf_counter() - started

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    answered = [s for ok, s in results if ok]
    missed = [s for ok, s in results if not ok]
    return {
        "answered": len(answered),
        "turned_away_fast": sum(1 for s in missed if s < 0.1),  # refused before any work: a 429 at once
        "missed_deadline": sum(1 for s in missed if s >= 0.1),  # queued, then past the deadline: a 429 after it
        "median_answered_s": statistics.median(answered) if answered else None,
        "median_missed_s": statistics.median(missed) if missed else None,
        "wall_s": time.perf_counter() - started,
    }


def markdown(result: dict) -> str:
    lines = [
        "### A burst of long requests at the decision call (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. N requests of a 5.5 KB pasted text each, sent at once "
        f"through the default config's decisions with {result['decider']} (decision timeout "
        f"{result['timeout_ms']:.0f} ms), {result['rounds']} rounds per N and arm, the arms alternating. "
        "Answered: within the timeout; turned away: refused before any work (under 0.1 s); missed: queued, then "
        "past the timeout. Counts summed over the rounds.",
        "",
        "| N | arm | answered | turned away at once | missed the deadline | median time, answered | median time, "
        "not answered |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, arms in result["sizes"].items():
        for arm in ARMS:
            rounds = arms[arm]
            total = len(rounds) * int(n)

            def median(key: str, rounds=rounds) -> str:
                values = [r[key] for r in rounds if r[key] is not None]
                return f"{statistics.median(values) * 1000:.0f} ms" if values else "-"

            lines.append(
                f"| {n} | {arm} | {sum(r['answered'] for r in rounds)}/{total} | "
                f"{sum(r['turned_away_fast'] for r in rounds)} | {sum(r['missed_deadline'] for r in rounds)} | "
                f"{median('median_answered_s')} | {median('median_missed_s')} |"
            )
    return "\n".join(lines)


async def run(sizes: list[int], rounds: int) -> dict:
    config = default_config()
    decider = make_decider(config.decider)
    config, _ = resolve_operating_points(config, decider)
    headroom = batcher_module.ADMISSION_HEADROOM
    await burst(config, decider, 4, "warm")  # the time per unit of work is measured
    out: dict = {}
    for n in sizes:
        out[str(n)] = {arm: [] for arm in ARMS}
        for round_ in range(rounds):
            for arm in ARMS if round_ % 2 == 0 else ARMS[::-1]:
                batcher_module.ADMISSION_HEADROOM = headroom if arm == "admission" else float("inf")
                out[str(n)][arm].append(await burst(config, decider, n, f"{arm}-{n}-{round_}"))
                await asyncio.sleep(0.5)  # the queue drains between bursts
    batcher_module.ADMISSION_HEADROOM = headroom
    await decider.aclose()
    return {"decider": decider.name, "timeout_ms": config.decision_timeout_ms, "sizes": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="4,8,16,32")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    result = {"machine": machine(), "rounds": args.rounds, **asyncio.run(run(sizes, args.rounds))}
    result["command"] = f"python benchmarks/gateway/burst.py --rounds {args.rounds} --sizes {args.sizes}"
    publish("gateway_burst", result, markdown(result), path=DOC)


if __name__ == "__main__":
    main()
