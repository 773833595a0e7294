"""The gateway's default decision call on pasted documents and bare requests, per guard window setting: what more
windows cost.

The guard judges a long untrusted text in at most `guard.max_windows` windows of up to `guard.window_chars`
characters, each one more encoder run on the request's path (guard_long_texts.py measures what they catch). This
times `gateway.decisions.run_decisions` with the default config (guard, harm, priority, …) in process, through the
gateway's `LocalDecider`, at c=1, on the everyday test side's pasted-document requests (100, 3,491 characters at the
median) and its first 100 bare requests (one user turn), each setting with a fresh decider so that no state comes
from another setting's cache; the first `--warm` requests of that shape in the calibration file warm it up. Median of
rounds, each over every request once.

Writes benchmarks/results/guard_document_latency.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/guard_document_latency.py [--model tuned --model reader] [--setting 400:8 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from guard_long_texts import limits_of

from _serverbench import TRAINING_DOC, machine, pct_ms, publish, with_guard
from jevserve.gateway.config import GatewayConfig, default_config
from jevserve.gateway.decider import make_decider
from jevserve.gateway.decisions import run_decisions
from jevserve.train.goal_cases import calibration_bodies, everyday_bodies

SETTINGS = ("400:8", "120:64")
SHAPES_TIMED = ("bare", "document")
PER_SHAPE = 100


def with_windows(config: GatewayConfig, setting: str) -> GatewayConfig:
    """`config` with every route's guard reading `window_chars:max_windows`."""
    limits = limits_of(setting)
    return with_guard(config, window_chars=limits.window_chars, max_windows=limits.max_windows)


async def one_round(decider, config: GatewayConfig, requests: list[dict], warm: list[dict]) -> dict:
    for body in warm:
        await run_decisions(body["messages"], config=config, decider=decider)
    latencies, questions = [], []
    for body in requests:
        report = await run_decisions(body["messages"], config=config, decider=decider)
        if report.error:
            raise SystemExit(f"the decision call failed: {report.error}")
        latencies.append(report.decision_ms / 1000.0)
        questions.append(report.num_questions)
    return {"c1": pct_ms(latencies), "questions_per_call": float(np.mean(questions))}


def markdown(result: dict) -> str:
    lines = [
        "### The decision call on pasted documents and bare requests, per guard window setting (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}; "
        f"the everyday test side's pasted-document requests ({result['requests']['document']}) and bare requests "
        f"({result['requests']['bare']}) at c=1, the default config with the guard's windows as given "
        f"(`window_chars:max_windows`), median of {result['rounds']} rounds.",
        "",
        "| model | windows | requests | questions per call | c=1 p50 ms | c=1 p99 ms | c=1 max ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['model']} | {row['setting']} | {row['shape']} | {row['questions_per_call']:.1f} | "
            f"{row['p50_ms']:.1f} | "
            f"{row['p99_ms']:.1f} | {row['max_ms']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a model spec (repeatable; default: tuned and reader)")
    parser.add_argument(
        "--setting", action="append", help=f"window_chars:max_windows (repeatable; default: {', '.join(SETTINGS)})"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds per model and setting (default 3)")
    parser.add_argument("--warm", type=int, default=5, help="calibration documents that warm each decider (default 5)")
    args = parser.parse_args()
    specs, settings = args.model or ["tuned", "reader"], args.setting or list(SETTINGS)
    everyday, calibration = everyday_bodies(), calibration_bodies()
    requests = {k: [b for shape, b in everyday if shape == k][:PER_SHAPE] for k in SHAPES_TIMED}
    warm = {k: [b for shape, b in calibration if shape == k][: args.warm] for k in SHAPES_TIMED}
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/guard_document_latency.py"
        + "".join(f" --model {s}" for s in args.model or [])
        + "".join(f" --setting {s}" for s in args.setting or []),
        "requests": {k: len(v) for k, v in requests.items()},
        "rounds": args.rounds,
        "rows": [],
    }
    for spec in specs:
        for setting, shape in ((setting, shape) for setting in settings for shape in SHAPES_TIMED):
            config = with_windows(default_config(), setting)
            rounds = []
            for _ in range(args.rounds):
                decider = make_decider(spec)  # fresh: no state read in an earlier round or setting is cached
                rounds.append(asyncio.run(one_round(decider, config, requests[shape], warm[shape])))
                asyncio.run(decider.aclose())
            result["rows"].append(
                {
                    "model": decider.name,
                    "spec": spec,
                    "setting": setting,
                    "shape": shape,
                    **{k: float(np.median([r["c1"][k] for r in rounds])) for k in ("p50_ms", "p99_ms", "max_ms")},
                    "questions_per_call": float(np.median([r["questions_per_call"] for r in rounds])),
                    "rounds": rounds,
                }
            )
    publish("guard_document_latency", result, markdown(result), path=TRAINING_DOC)


if __name__ == "__main__":
    main()
