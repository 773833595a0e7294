"""How often the 95% interval `jevserve sim run` prints for its SLO attainment holds the attainment of long runs.

For each setting (engine batch limit, Poisson rate) and run length, `--seeds` runs of `sim run`'s defaults
(ShareGPT, all splits, `qwen3-8b-h200`, FCFS, TTFT <= 1 s; arrival and workload seed = the run's seed) each give an
interval; the reference is the mean attainment of four runs of 12,000 requests (seeds 100-103). Coverage is the
share of runs whose interval holds the reference, for the interval `sim run` prints (sim.stats.batch_means_interval)
and for the former one (a Student-t interval over 10 batch shares), with a Clopper-Pearson 95% interval of the
coverage itself (scipy). The batch-count rule (one batch per 100 requests, 5 to 10) was chosen looking at the
`max-num-seqs 2` settings; the `max-num-seqs 4` ones were measured after it was fixed.

    .venv/bin/python benchmarks/sim/attainment_interval.py [--seeds 60] [--fresh]

Resumable: each finished run is kept in benchmarks/results/sim_attainment_interval.runs.jsonl. Writes
benchmarks/results/sim_attainment_interval.json and a section of docs/sim.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from harness import RESULTS, Checkpoint, watch_load, write_report
from jevserve.serving import make_queue_policy
from jevserve.serving.engine_config import EngineConfig
from jevserve.sim.arrivals import make_arrivals
from jevserve.sim.metrics import Slo, is_good
from jevserve.sim.profile import load_profile
from jevserve.sim.run import simulate, with_arrivals
from jevserve.sim.stats import batch_means_interval
from jevserve.sim.workloads.lengths import fit_context
from jevserve.sim.workloads.sharegpt import sample_sharegpt

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ((2, 0.3), (2, 0.5), (2, 0.8), (2, 1.0), (2, 1.2), (4, 1.8), (4, 2.4))  # (max_num_seqs, rate req/s)
CHOSEN_ON = {2}  # the max_num_seqs whose settings were looked at when the batch-count rule was chosen
LENGTHS = (400, 1500)
REFERENCE_LENGTH, REFERENCE_SEEDS = 12_000, (100, 101, 102, 103)
MAX_MODEL_LEN = 40960  # sim run's default


def met_in_arrival_order(num_requests: int, rate: float, max_num_seqs: int, seed: int) -> str:
    """One `sim run` with its defaults: whether each request met the SLO, in arrival order ("1" met, "0" not)."""
    requests = fit_context(sample_sharegpt(num_requests, seed=seed, split="all"), MAX_MODEL_LEN)
    requests = with_arrivals(requests, make_arrivals("poisson", len(requests), rate, seed))
    _, recorder = simulate(requests, load_profile("qwen3-8b-h200"), make_queue_policy("fcfs"),
                           EngineConfig(max_num_seqs=max_num_seqs))
    if recorder.num_rejected:
        raise RuntimeError("a request was refused: the coverage would count it differently from sim run")
    records = sorted(recorder.records, key=lambda r: r.arrival_s)
    return "".join("1" if is_good(r, Slo()) else "0" for r in records)


def as_array(met: str) -> np.ndarray:
    """A run's met string as 0.0 / 1.0 per request."""
    return np.frombuffer(met.encode(), dtype=np.uint8) - ord("0")


def former_interval(met: np.ndarray) -> tuple[float, float]:
    """The interval `sim run` printed before: a Student-t interval over the shares of 10 consecutive batches."""
    shares = np.array([float(np.mean(b)) for b in np.array_split(met.astype(float), 10)])
    if np.all(shares == shares[0]):
        return float(shares[0]), float(shares[0])
    low, high = stats.t.interval(0.95, df=9, loc=shares.mean(), scale=stats.sem(shares))
    return max(0.0, float(low)), min(1.0, float(high))


def coverage(held: list[bool]) -> dict:
    """The share held, with its Clopper-Pearson 95% interval."""
    k, n = int(sum(held)), len(held)
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return {"held": k, "runs": n, "share": k / n, "low": float(ci.low), "high": float(ci.high)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=60, help="runs per setting and length (default: 60)")
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming")
    args = parser.parse_args()
    checkpoint = Checkpoint(RESULTS / "sim_attainment_interval.runs.jsonl",
                            {"settings": SETTINGS, "lengths": LENGTHS, "seeds": args.seeds}, fresh=args.fresh)
    cases = [(mns, rate, n, seed) for mns, rate in SETTINGS
             for n, seeds in ((REFERENCE_LENGTH, REFERENCE_SEEDS), *((n, range(args.seeds)) for n in LENGTHS))
             for seed in seeds]
    with watch_load() as load:
        for mns, rate, n, seed in tqdm(cases, desc="sim runs", unit="run"):
            key = f"{mns}/{rate}/{n}/{seed}"
            if not checkpoint.done(key):
                checkpoint.add(key, {"met": met_in_arrival_order(n, rate, mns, seed)})
    runs = checkpoint.records()
    rows = []
    for mns, rate in SETTINGS:
        reference = float(np.mean([np.mean(as_array(runs[f"{mns}/{rate}/{REFERENCE_LENGTH}/{s}"]["met"]))
                                   for s in REFERENCE_SEEDS]))
        for n in LENGTHS:
            mets = [as_array(runs[f"{mns}/{rate}/{n}/{s}"]["met"]) for s in range(args.seeds)]
            now = [batch_means_interval(m.astype(bool))[1:] for m in mets]
            before = [former_interval(m) for m in mets]
            rows.append({
                "max_num_seqs": mns, "rate_rps": rate, "num_requests": n, "reference": reference,
                "chosen_on": mns in CHOSEN_ON,
                "mean_attainment": float(np.mean([np.mean(m) for m in mets])),
                "sd_attainment": float(np.std([np.mean(m) for m in mets], ddof=1)),
                "now": {**coverage([lo <= reference <= hi for lo, hi in now]),
                        "mean_width": float(np.mean([hi - lo for lo, hi in now]))},
                "before": {**coverage([lo <= reference <= hi for lo, hi in before]),
                           "mean_width": float(np.mean([hi - lo for lo, hi in before]))},
            })

    def cell(c: dict) -> str:
        return (f"{c['held']}/{c['runs']} ({100 * c['low']:.0f}–{100 * c['high']:.0f} %), "
                f"width {100 * c['mean_width']:.1f}")

    table = "\n".join([
        f"Coverage of the 95 % attainment interval: runs (of {args.seeds} seeds) whose interval holds the mean "
        f"attainment of four {REFERENCE_LENGTH:,}-request runs, with the coverage's own 95 % interval and the mean "
        "width in points; *now* is the interval `sim run` prints (Wilson's at the effective number of requests "
        "from 5–10 batch means), *before* a t interval over 10 batch shares. The batch-count rule was chosen "
        "looking at the batch-limit-2 rows; the batch-limit-4 rows were measured after.",
        "",
        "| max_num_seqs | rate (req/s) | requests | long-run attainment | mean over seeds | sd over seeds | now | "
        "before |",
        "|---:|---:|---:|---:|---:|---:|---|---|",
        *(f"| {r['max_num_seqs']}{'' if r['chosen_on'] else ' (after)'} | {r['rate_rps']:g} | {r['num_requests']:,} "
          f"| {100 * r['reference']:.1f} % | {100 * r['mean_attainment']:.1f} % | {100 * r['sd_attainment']:.1f} | "
          f"{cell(r['now'])} | {cell(r['before'])} |" for r in rows),
    ])
    write_report("sim_attainment_interval", {"seeds": args.seeds, "rows": rows}, table,
                 doc=ROOT / "docs" / "sim.md", load=load)
    print(table)


if __name__ == "__main__":
    main()
