"""Speed of the simulator: one 2,000-request ShareGPT run, and the full queue-order sweep on all cores.

Targets (issue 3): 2,000 ShareGPT requests at 1.4 req/s through one replica in <= 2 s; the queue-order sweep
(2 seeds x 8 policies x 10 rates = 160 simulations) in <= 5 min using both cores.

    .venv/bin/python benchmarks/sim_speed.py [--repeats 5] [--jobs 2]

Writes benchmarks/results/sim_speed.json and docs/benchmarks-sim.md. Timings are wall-clock on this machine;
the load average before and after is recorded because other work on the machine slows them down.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from jevserve.serving import make_queue_policy
from jevserve.sim.arrivals import poisson_arrivals
from jevserve.sim.engine import EngineConfig
from jevserve.sim.experiments.queue_order import QueueOrderSetup, build_requests, scaled_profile
from jevserve.sim.experiments.sweep import Cell, SweepContext, run_cells
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import load_profile
from jevserve.sim.run import simulate_summary, with_arrivals
from jevserve.sim.workloads.sharegpt import sample_sharegpt

ROOT = Path(__file__).resolve().parent.parent
SINGLE_TARGET_S, SWEEP_TARGET_S = 2.0, 300.0
# Near the scale `jevserve sim queue-order` calibrates (0.774 in docs/queue-order.md); speed barely depends on it.


def time_single_runs(repeats: int) -> list[dict]:
    """Median wall time of one 2,000-request run, for each engine setting and a few policies."""
    profile = load_profile("qwen3-8b-h200")
    requests = with_arrivals(sample_sharegpt(2000, seed=0, split="test"), poisson_arrivals(2000, 1.4, 0))
    rows = []
    for setting, config, scale in (("vLLM defaults (max_num_seqs=1024)", EngineConfig(), 1.0),
                                   ("queue-order (max_num_seqs=2, step scale 0.77)", EngineConfig(max_num_seqs=2),
                                    0.77)):
        for policy in ("fcfs", "spf", "tlf"):
            times, steps = [], 0
            for _ in range(repeats):
                start = time.perf_counter()
                policy_object = make_queue_policy(policy, aging_s=10.0)
                out = simulate_summary(requests, scaled_profile(profile, scale), policy_object, config, Slo())
                times.append(time.perf_counter() - start)
                steps = out["num_steps"]
            rows.append({"setting": setting, "policy": f"{policy}+aging", "median_s": statistics.median(times),
                         "min_s": min(times), "max_s": max(times), "num_steps": steps, "repeats": repeats})
    return rows


def time_sweep(jobs: int) -> dict:
    """Wall time of the 160-simulation queue-order sweep (step scale fixed, so no calibration)."""
    setup = QueueOrderSetup(profile=load_profile("qwen3-8b-h200"), step_scale=0.77)
    requests, _ = build_requests(setup)
    context = SweepContext(tuple(requests), scaled_profile(setup.profile, 0.77), setup.config, setup.slo)
    cells = [Cell(p, r, s) for p in setup.policies() for r in setup.rates for s in setup.seeds]
    start = time.perf_counter()
    run_cells(cells, context, jobs=jobs)
    return {"num_simulations": len(cells), "jobs": jobs, "wall_s": time.perf_counter() - start}


def write_markdown(result: dict, path: Path) -> None:
    """The results as a markdown table with the command that regenerates them."""
    lines = [
        "# Simulator speed",
        "",
        "Regenerate: `.venv/bin/python benchmarks/sim_speed.py` (writes `benchmarks/results/sim_speed.json`).",
        "",
        f"Machine: {result['machine']['cpus']} CPUs, {result['machine']['platform']}, Python "
        f"{result['machine']['python']}; load average {result['load_before']:.2f} before and "
        f"{result['load_after']:.2f} after{' (the machine was busy with other work)' if result['busy'] else ''}.",
        "",
        "## One replica, 2,000 ShareGPT requests at 1.4 req/s (target <= 2 s)",
        "",
        "| engine setting | policy | median (s) | min–max (s) | engine steps | meets target |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["single"]:
        lines.append(f"| {r['setting']} | {r['policy']} | {r['median_s']:.3f} | {r['min_s']:.3f}–{r['max_s']:.3f} | "
                     f"{r['num_steps']:,} | {'yes' if r['median_s'] <= SINGLE_TARGET_S else 'no'} |")
    s = result["sweep"]
    lines += [
        "",
        "## Queue-order sweep (target <= 300 s on both cores)",
        "",
        "| simulations | processes | wall (s) | meets target |",
        "|---|---|---|---|",
        f"| {s['num_simulations']} | {s['jobs']} | {s['wall_s']:.1f} | "
        f"{'yes' if s['wall_s'] <= SWEEP_TARGET_S else 'no'} |",
        "",
        "The sweep fixes the step scale; `jevserve sim queue-order` also calibrates it first (about 15 FCFS sweeps of "
        "20 simulations each), which `docs/queue-order.md` times as part of the whole command.",
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> int:
    """Run both measurements and write the JSON and markdown results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per single-run measurement (default: 5)")
    parser.add_argument("--jobs", type=int, default=2, help="processes for the sweep (default: 2)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    single = time_single_runs(args.repeats)
    sweep = time_sweep(args.jobs)
    load_after = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    result = {
        "single": single, "sweep": sweep, "load_before": load_before, "load_after": load_after,
        "busy": max(load_before, load_after) > 0.5 * cpus,
        "machine": {"cpus": cpus, "platform": platform.platform(), "python": platform.python_version()},
    }
    out = ROOT / "benchmarks" / "results" / "sim_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    write_markdown(result, ROOT / "docs" / "benchmarks-sim.md")
    for r in single:
        print(f"{r['setting']:>48} {r['policy']:>11}: {r['median_s']:.3f} s")
    print(f"sweep: {sweep['num_simulations']} simulations in {sweep['wall_s']:.1f} s with {sweep['jobs']} processes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
