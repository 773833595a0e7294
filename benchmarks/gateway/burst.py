"""A burst of long requests at the gateway's decision call: how many are answered within the decision timeout, with
the decider turning away at once what it cannot answer in time (admission) and without (every request queued); and
the same requests kept in flight, a new one as each ends (sustained load).

Each request is a pasted text of 60 sentences (about 5.5 KB, so the guard reads it whole and in 8 windows and harm
reads its first 512 word pieces), all different, N sent at once through `run_decisions` with the default config and
the embedded decider, several rounds per N. Without admission every request is queued and the decider answers them
in turn, so under a burst the later ones miss the 1 s deadline after their work was done (with
`on_decision_timeout: reject`, a 429 after a second). With it (Batcher.decide's `budget_s`), a request whose work,
with the work queued before it, would not fit the deadline is turned away before anything is computed for it.
Sustained: 96 such requests, 16 kept in flight (a turned-away request frees its place at once, so its successor
comes sooner than after a wait). The arms alternate round by round on the same warm decider (admission off: the
headroom set to infinity, nothing turned away), so both see the same machine in the same minutes.

Writes benchmarks/results/gateway_burst.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/burst.py [--rounds 3] [--sizes 4,8,16,32,64:300] [--sustained 96]
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


def text(tag: str, i: int, chars: int = 0) -> str:
    """A pasted text of 60 sentences (about 5.5 KB), or its first `chars` characters."""
    tag = f"{tag}-{i}"  # every text new: the decider keeps what it read, and a repeat costs nothing
    whole = "Please read this carefully. " + " ".join(
        f"Sentence {k} of the pasted text {tag} explains a detail about gardening, soil, water and light."
        for k in range(60)
    )
    return whole[:chars] if chars else whole


async def burst(config, decider, n: int, tag: str, chars: int = 0) -> dict:
    async def one(i: int) -> tuple[bool, float]:
        started = time.perf_counter()
        message = {"role": "user", "content": text(tag, i, chars)}
        report = await run_decisions([message], config=config, decider=decider)
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


async def sustained(config, decider, total: int, in_flight: int, tag: str) -> dict:
    slots = asyncio.Semaphore(in_flight)

    async def one(i: int) -> tuple[bool, float]:
        async with slots:
            started = time.perf_counter()
            report = await run_decisions([{"role": "user", "content": text(tag, i)}], config=config, decider=decider)
            return report.error is None, time.perf_counter() - started

    started = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(total)))
    missed = [s for ok, s in results if not ok]
    return {
        "answered": sum(1 for ok, _ in results if ok),
        "turned_away_fast": sum(1 for s in missed if s < 0.1),
        "missed_deadline": sum(1 for s in missed if s >= 0.1),
        "wall_s": time.perf_counter() - started,
    }


def markdown(result: dict) -> str:
    lines = [
        "### A burst of long requests at the decision call (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. N requests of a 5.5 KB pasted text each (or its first "
        "characters), sent at once "
        f"through the default config's decisions with {result['decider']} (decision timeout "
        f"{result['timeout_ms']:.0f} ms), {result['rounds']} rounds per N and arm, the arms alternating. "
        "Answered: within the timeout; turned away: refused before any work (under 0.1 s); missed: queued, then "
        "past the timeout. Counts summed over the rounds.",
        "",
        "| N | text | arm | answered | turned away at once | missed the deadline | median time, answered | "
        "median time, not answered |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, arms in result["sizes"].items():
        n, _, chars = size.partition(":")
        for arm in ARMS:
            rounds = arms[arm]
            total = len(rounds) * int(n)

            def median(key: str, rounds=rounds) -> str:
                values = [r[key] for r in rounds if r[key] is not None]
                return f"{statistics.median(values) * 1000:.0f} ms" if values else "-"

            length = f"{chars} chars" if chars else "5.5 KB"
            lines.append(
                f"| {n} | {length} | {arm} | {sum(r['answered'] for r in rounds)}/{total} | "
                f"{sum(r['turned_away_fast'] for r in rounds)} | {sum(r['missed_deadline'] for r in rounds)} | "
                f"{median('median_answered_s')} | {median('median_missed_s')} |"
            )
    held = result.get("sustained")
    if held:
        lines += [
            "",
            f"Sustained: {held['total']} such requests, {held['in_flight']} kept in flight, {len(held['queued'])} "
            "rounds per arm, the arms alternating.",
            "",
            "| arm | answered, per round | turned away at once | missed the deadline | seconds, per round |",
            "|---|---|---|---|---|",
        ]
        for arm in ARMS:
            rounds = held[arm]
            lines.append(
                f"| {arm} | {', '.join(str(r['answered']) for r in rounds)} of {held['total']} | "
                f"{sum(r['turned_away_fast'] for r in rounds)} | {sum(r['missed_deadline'] for r in rounds)} | "
                f"{', '.join(format(r['wall_s'], '.1f') for r in rounds)} |"
            )
    return "\n".join(lines)


async def run(sizes: list[str], rounds: int, total: int) -> dict:
    config = default_config()
    decider = make_decider(config.decider)
    config, _ = resolve_operating_points(config, decider)
    headroom = batcher_module.ADMISSION_HEADROOM
    await burst(config, decider, 4, "warm")  # the time per unit of work is measured
    out: dict = {}
    for size in sizes:  # N, or N:CHARS for N texts of their first CHARS characters
        n, _, chars = size.partition(":")
        out[size] = {arm: [] for arm in ARMS}
        for round_ in range(rounds):
            for arm in ARMS if round_ % 2 == 0 else ARMS[::-1]:
                batcher_module.ADMISSION_HEADROOM = headroom if arm == "admission" else float("inf")
                tag = f"{arm}-{size}-{round_}"
                out[size][arm].append(await burst(config, decider, int(n), tag, int(chars or 0)))
                await asyncio.sleep(0.5)  # the queue drains between bursts
    held: dict = {"total": total, "in_flight": 16, **{arm: [] for arm in ARMS}}
    for round_ in range(rounds if total else 0):
        for arm in ARMS if round_ % 2 == 0 else ARMS[::-1]:
            batcher_module.ADMISSION_HEADROOM = headroom if arm == "admission" else float("inf")
            held[arm].append(await sustained(config, decider, total, 16, f"held-{arm}-{round_}"))
            await asyncio.sleep(0.5)
    batcher_module.ADMISSION_HEADROOM = headroom
    await decider.aclose()
    return {"decider": decider.name, "timeout_ms": config.decision_timeout_ms, "sizes": out,
            "sustained": held if total else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="4,8,16,32,64:300",
                        help="bursts: N requests of the whole text, or N:CHARS of its first CHARS characters")
    parser.add_argument("--sustained", type=int, default=96, help="requests of the sustained run (0: none)")
    args = parser.parse_args()
    sizes = [s.strip() for s in args.sizes.split(",")]
    result = {"machine": machine(), "rounds": args.rounds, **asyncio.run(run(sizes, args.rounds, args.sustained))}
    result["command"] = (f"python benchmarks/gateway/burst.py --rounds {args.rounds} --sizes {args.sizes} "
                         f"--sustained {args.sustained}")
    publish("gateway_burst", result, markdown(result), path=DOC)


if __name__ == "__main__":
    main()
