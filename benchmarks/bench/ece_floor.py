"""How low can a task's ECE be at the bench's test sizes? The ECE a perfectly calibrated model would show.

ECE over 10 equal-width bins is biased upwards on a finite test side: even when every P(positive) is exactly
right, each bin's positive share differs from its mean probability by sampling noise. This draws the labels a
perfectly calibrated model would meet (each item's label ~ Bernoulli(its own P(positive))), keeping the model's
own probabilities, and reports the mean ECE over the draws (and its 95th percentile) next to the measured one,
per task and averaged like the board's mean ECE. Reads the model's bench answers cache (the test-side
probabilities `jevserve bench run` stored) and the test labels; changes nothing.

Writes benchmarks/results/ece_floor.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/bench/ece_floor.py [--model jev-minilm-2 --model jev-minilm-2@DIGEST] [--draws 2000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import TRAINING_DOC, machine, replace_section, write_result
from jevserve.bench import TASKS, BenchData
from jevserve.bench.answers_cache import default_answers_dir
from jevserve.bench.pipeline import load_tasks
from jevserve.bench.stats import ECE_BINS, expected_calibration_error
from jevserve.web.calibration import cache_files, read_answers, task_probabilities


def cache_file(answers_dir: Path, spec: str) -> tuple[str, Path]:
    """(model, cache file) for MODEL (its newest cache) or MODEL@DIGEST (that version's cache)."""
    model, _, digest = spec.partition("@")
    files = [f for f in cache_files(answers_dir, model) if not digest or f.stem.endswith(f"@{digest}")]
    if not files:
        raise SystemExit(f"no answers cache for {spec} in {answers_dir}: run `jevserve bench run --model {model}`")
    return model, files[0]


def calibrated_floor(p: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """ECE of `draws` label sets drawn from the probabilities themselves (a perfectly calibrated model)."""
    labels = rng.random((draws, len(p))) < p
    return np.array([expected_calibration_error(p, y) for y in labels])


def markdown(result: dict) -> str:
    lines = [
        "## The ECE a perfectly calibrated model would show at the bench's test sizes",
        "",
        f"Per task: the measured test-side ECE ({ECE_BINS} equal-width bins), and the ECE the same probabilities "
        "would show if they were exactly right (labels drawn from them, mean and 95th percentile over "
        f"{result['draws']} draws). A measured ECE inside the floor's range is sampling noise, not miscalibration.",
        "",
    ]
    for model, m in result["models"].items():
        lines += [
            f"**{model}** ({m['cache_file']}): mean ECE {m['mean_ece']:.3f}; a perfectly calibrated model with "
            f"these probabilities: {m['mean_floor']:.3f} (95th percentile of the mean {m['mean_floor_p95']:.3f}).",
            "",
            "| task | test items | P(positive) range | measured ECE | calibrated floor (mean) | floor 95th pct |",
            "|---|---|---|---|---|---|",
        ]
        for name, t in m["tasks"].items():
            lines.append(
                f"| {name} | {t['n']} | {t['p_min']:.2f}–{t['p_max']:.2f} | {t['ece']:.3f} | {t['floor_mean']:.3f} "
                f"| {t['floor_p95']:.3f} |"
            )
        lines.append("")
    info = result["machine"]
    lines.append(f"Command: `{result['command']}` ({info['when']}).")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="MODEL[@DIGEST]",
        help="model whose newest answers cache to read, or one version's (repeatable; default jev-minilm-2)",
    )
    parser.add_argument("--draws", type=int, default=2000, help="label draws per task")
    parser.add_argument("--answers-dir", type=Path, default=None, help="bench answers caches (default: bench's)")
    args = parser.parse_args()
    models = args.model or ["jev-minilm-2"]
    answers_dir = args.answers_dir or default_answers_dir()
    loaded, _ = load_tasks(list(TASKS.values()), BenchData(), log=lambda _: None)
    rng = np.random.default_rng(0)
    result = {"machine": machine(), "draws": args.draws, "models": {}}
    result["command"] = "python benchmarks/bench/ece_floor.py" + "".join(f" --model {m}" for m in args.model)
    for spec in models:
        model, path = cache_file(answers_dir, spec)
        per_task = task_probabilities(read_answers(path), model, loaded)
        tasks, floors = {}, []
        for name, (p, y) in per_task.items():
            floor = calibrated_floor(p, args.draws, rng)
            floors.append(floor)
            tasks[name] = {
                "n": len(p),
                "ece": expected_calibration_error(p, y),
                "floor_mean": float(floor.mean()),
                "floor_p95": float(np.percentile(floor, 95)),
                "p_min": float(p.min()),
                "p_max": float(p.max()),
            }
        mean_floor = np.mean(floors, axis=0)  # per draw, the mean over tasks (draws are independent per task)
        result["models"][path.stem] = {
            "cache_file": path.name,
            "tasks": tasks,
            "mean_ece": float(np.mean([t["ece"] for t in tasks.values()])),
            "mean_floor": float(mean_floor.mean()),
            "mean_floor_p95": float(np.percentile(mean_floor, 95)),
        }
    path = write_result("ece_floor", result)
    replace_section("ece_floor", markdown(result), TRAINING_DOC)
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
