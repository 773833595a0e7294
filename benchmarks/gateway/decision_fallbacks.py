"""How many requests fall back at the gateway's decision timeout, decider against decider, in paired rounds.

A decision that gets no answer within `decision_timeout_ms` falls back (the request goes on as if it had not acted),
so on a loaded or slower machine a recall figure measured at the default 1 s timeout is partly a count of
timeouts (docs/gateway.md says how many per section). Whether a change to a model costs time there is read by
running the deciders alternately on the same requests, same machine, same minutes: each round runs every decider
once over guard-jailbreak's test positives (long texts, so several sentence windows each), 16 in flight as
benchmarks/gateway/everyday.py sends them, through the default route's guard.

`--decider tuned-readout-alone` is the committed tuned reader without its lexical heads (its readout and layers
copied to a temporary directory, served as `tuned:PATH`), the comparison that tells the heads' cost from the
machine's.

Writes benchmarks/results/decision_fallbacks.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/decision_fallbacks.py --decider SPEC --decider SPEC [--rounds 2]
     [--whole-up-to-chars N] [--decision-timeout-ms MS]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from everyday import user, verdict_probabilities

from _serverbench import ROOT, guard_whole_up_to, machine, publish
from jevserve.bench.data import BenchData
from jevserve.bench.tasks import TASKS
from jevserve.gateway import default_config, make_decider
from jevserve.gateway.operating_points import resolve_operating_points

READOUT_ALONE = "tuned-readout-alone"


def readout_alone(directory: Path) -> str:
    """A `tuned:PATH` spec of the committed tuned readout and layers without the lexical heads beside them."""
    from jevserve.decide.tuned import TUNED_WEIGHTS, layers_file

    for source in (TUNED_WEIGHTS, layers_file(TUNED_WEIGHTS)):
        shutil.copyfile(source, directory / source.name)
    return f"tuned:{directory / TUNED_WEIGHTS.name}"


def measure(specs: list[str], rounds: int, whole_up_to: int, timeout_ms: float | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        return _measure(specs, rounds, whole_up_to, timeout_ms, Path(tmp))


def _measure(specs: list[str], rounds: int, whole_up_to: int, timeout_ms: float | None, tmp: Path) -> dict:
    items = [i for i in TASKS["guard-jailbreak"].load_items(BenchData()) if i.split == "test" and i.label]
    bodies = [user(i.state) for i in items]
    prepared = []
    for spec in specs:  # operating points resolved (and cached) before any round is timed
        served = readout_alone(tmp) if spec == READOUT_ALONE else spec
        config = guard_whole_up_to(default_config().model_copy(update={"decider": served}), whole_up_to)
        if timeout_ms:
            config = config.model_copy(update={"decision_timeout_ms": timeout_ms})
        decider = make_decider(config.decider)
        resolved, _ = resolve_operating_points(config, decider)
        prepared.append((spec, decider, resolved))
    runs = []
    for number in range(rounds):
        for spec, decider, resolved in prepared:
            started = time.monotonic()
            found = asyncio.run(verdict_probabilities(decider, resolved, bodies, decisions=("guard",)))
            runs.append({
                "round": number, "decider": spec, "name": decider.name,
                "fell back": sum(p is None for p in found["guard"]), "requests": len(bodies),
                "seconds": round(time.monotonic() - started, 1),
            })  # fmt: skip
            print(runs[-1], flush=True)
    return {
        "machine": machine(),
        "timeout_ms": prepared[0][2].decision_timeout_ms,
        "whole_up_to_chars": whole_up_to,
        "runs": runs,
    }


def markdown(result: dict) -> str:
    lines = [
        "### Decision fallbacks at the timeout, decider against decider (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}. Guard-jailbreak's {result['runs'][0]['requests']} test "
        f"positives as user turns, 16 in flight, through the default route's guard (texts up to "
        f"{result['whole_up_to_chars']:,} characters judged whole only); decision timeout "
        f"{result['timeout_ms']:g} ms; the deciders alternate within each round.",
        "",
        "| round | decider | fell back | seconds |",
        "|---|---|---|---|",
    ]
    for run in result["runs"]:
        lines.append(f"| {run['round']} | {run['decider']} | {run['fell back']} of {run['requests']} | "
                     f"{run['seconds']:.1f} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decider", action="append", required=True,
                        help=f"a decider spec, or {READOUT_ALONE} (repeatable)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over every decider (default: %(default)s)")
    parser.add_argument("--whole-up-to-chars", type=int, default=1000,
                        help="guard.whole_up_to_chars (default: %(default)s; 0: the config's)")
    parser.add_argument("--decision-timeout-ms", type=float, default=None,
                        help="decision_timeout_ms (default: the config's)")
    args = parser.parse_args()
    result = measure(args.decider, args.rounds, args.whole_up_to_chars, args.decision_timeout_ms)
    result["command"] = (
        "python benchmarks/gateway/decision_fallbacks.py"
        + "".join(f" --decider {spec}" for spec in args.decider)
        + (f" --rounds {args.rounds}" if args.rounds != 2 else "")
        + (f" --whole-up-to-chars {args.whole_up_to_chars}" if args.whole_up_to_chars != 1000 else "")
        + (f" --decision-timeout-ms {args.decision_timeout_ms:g}" if args.decision_timeout_ms else "")
    )
    publish("decision_fallbacks", result, markdown(result), path=ROOT / "docs" / "gateway.md")


if __name__ == "__main__":
    main()
