"""`jevserve sim cluster`: replicas behind routers over a range of rates; resumable sweep, summary and report.

Imports of numpy and the simulator happen inside the command, so `jevserve --help` stays light.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from jevserve import json_report
from jevserve.argtypes import check_writable, kendall_tau, nonnegative_float, positive_float, positive_int
from jevserve.argtypes import seed as seed_arg
from jevserve.sim.argtypes import arrivals_arg, gamma_cv
from jevserve.sim.workload_args import add_length_scaling_arguments, load_workload

CLUSTER_RESULTS_VERSION = 3  # bump when a change alters cluster results, so cached runs are not reused (3: MMPP)
PREDICTION_SOURCES = ("noisy", "true", "none")
DEFAULT_RATES = (300.0, 420.0, 480.0, 520.0, 560.0, 600.0)
# vLLM's max_num_seqs default below 70 GiB of GPU memory (and in V0). With 1,024, a replica holds about 4x more
# requests, so runs need about 3x more requests to reach a steady state and each snapshot costs 4x more.
DEFAULT_MAX_NUM_SEQS = 256


def add_cluster_arguments(p: argparse.ArgumentParser, floats, ints) -> None:
    """The options of `jevserve sim cluster` (the engine options are added by the caller, as for `sim run`)."""
    p.add_argument("--replicas", type=positive_int("--replicas"), default=4,
                   help="replicas, all with --profile (default: 4)")
    p.add_argument("--replica-profiles", default=None,
                   help="comma-separated profile per replica (names or .toml paths); overrides --replicas")
    p.add_argument("--router", default="rr,jsq,lot,latency",
                   help="comma-separated routers: rr, jsq, lot, latency (default: %(default)s)")
    p.add_argument("--rates", type=floats, default=DEFAULT_RATES,
                   help="total request rates, req/s (default: 300,...,600: up to 1.15x the stability bound of "
                   "4 H200 replicas on ShareGPT with max_num_seqs 256, about 504 req/s by `jevserve plan`)")
    p.add_argument("--seeds", type=ints, default=(0, 1), help="arrival seeds (default: 0,1)")
    p.add_argument("--workload", default="sharegpt", help="'sharegpt', 'synthetic' or a trace file (.jsonl/.csv)")
    p.add_argument("--num-requests", type=positive_int("--num-requests"), default=8000,
                   help="requests per run (default: 8000, about 16 s of traffic at 500 req/s)")
    p.add_argument("--workload-seed", type=seed_arg, default=0, help="which requests are sampled (default: 0)")
    p.add_argument("--prompt-dist", default="lognormal:90:1.0:1024", help="synthetic prompt lengths")
    p.add_argument("--output-dist", default="lognormal:200:1.0:2048", help="synthetic reply lengths")
    add_length_scaling_arguments(p)
    p.add_argument("--arrivals", type=arrivals_arg(allow_trace=False), default="poisson",
                   help="arrival process: poisson, gamma:CV or mmpp:BURST_RATIO:BURST_SHARE:MEAN_PHASE_GAPS; every "
                   "rate scales one realisation per seed (default: poisson)")
    p.add_argument("--cv", type=positive_float("--cv"), default=None,
                     help="coefficient of variation of the gaps of plain `--arrivals gamma` (default: 2)")
    p.add_argument("--length-predictions", default="noisy",
                   help="comma-separated sources of predicted reply lengths: noisy (oracle with Kendall tau "
                   "--oracle-tau), true, none; the first is used by every router, the others by 'latency' only, "
                   "to show how predictions change the estimator (default: noisy)")
    p.add_argument("--predictions", type=Path, default=None, help="JSONL of request_id -> predicted_tokens "
                   "(replaces the first --length-predictions source)")
    p.add_argument("--oracle-tau", type=kendall_tau, default=0.6, help="Kendall tau of the noisy oracle (default: 0.6)")
    p.add_argument("--default-output-tokens", type=positive_float("--default-output-tokens"), default=256.0,
                   help="reply length the estimator assumes for a request without a prediction (default: 256)")
    p.add_argument("--policy", default="fcfs", help="queue policy of every replica (default: fcfs)")
    p.add_argument("--aging-s", type=positive_float("--aging-s"), default=None,
                   help="queue-policy aging threshold, seconds")
    p.add_argument("--decision-delay-ms", type=nonnegative_float("--decision-delay-ms"), default=0.0,
                   help="wait before a request is queued")
    p.add_argument("--out", type=Path, default=Path("results/cache/cluster"),
                   help="folder for runs-*.jsonl (resumable) and summary-*.json (default: %(default)s)")
    p.add_argument("--doc", type=Path, default=None, help="write the report into this markdown file")
    p.add_argument("--section", default="main", help="name of the generated section in --doc (default: main)")
    p.add_argument("--img-dir", type=Path, default=Path("docs/img"), help="folder for the plots (with --doc)")
    p.add_argument("--jobs", type=positive_int("--jobs"), default=None, help="worker processes (default: all cores)")


def _fingerprint(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _names(text: str, field: str, allowed: tuple[str, ...] | None = None) -> list[str]:
    from jevserve.sim.errors import WorkloadError

    items = [x.strip() for x in text.split(",")]
    if allowed is None and "" in items[:-1]:  # a trailing comma is a habit; `h100,,h200` meant three replicas
        raise WorkloadError(f"--{field} {text!r} has an empty item; name one profile per replica, e.g. "
                            "qwen3-8b-h100,qwen3-8b-h100,qwen3-8b-h200")
    names = [x for x in items if x]
    bad = [x for x in names if allowed is not None and x not in allowed]
    if field == "router" and "utility" in bad:
        raise WorkloadError(f"--router {text!r}: utility routes among models of different size and price; "
                            f"sim cluster's replicas serve one model (routers: {', '.join(allowed or ())})")
    if not names or bad:
        expected = f"; expected a comma-separated list of: {', '.join(allowed)}" if allowed else ""
        raise WorkloadError(f"--{field} {text!r}{expected}")
    return names


def with_predictions(requests, source: str, args: argparse.Namespace):
    """The requests with predicted reply lengths from `source` (noisy, true, none, or the --predictions file)."""
    import dataclasses

    from jevserve.sim.workloads.predictions import attach_predictions, noisy_oracle, read_predictions

    if source == "file":
        return attach_predictions(list(requests), read_predictions(args.predictions)), {"kind": "file"}
    if source == "true":
        return [dataclasses.replace(r, predicted_output_tokens=float(r.num_output_tokens)) for r in requests], \
            {"kind": "true"}
    if source == "none":
        return [dataclasses.replace(r, predicted_output_tokens=None) for r in requests], {"kind": "none"}
    out, tau = noisy_oracle(list(requests), kendall_tau=args.oracle_tau, seed=args.workload_seed)
    return out, {"kind": "noisy", "kendall_tau": round(tau, 4)}


def run_cluster_command(args: argparse.Namespace, config, slo) -> int:
    """Run `jevserve sim cluster` with parsed arguments; returns the exit status."""
    import numpy as np
    from tqdm import tqdm

    from jevserve.lab.cluster.report import aggregate, plot, write_section
    from jevserve.lab.cluster.sweep import cells_for, run_cluster_cells
    from jevserve.serving.registry import router_names
    from jevserve.sim.cluster import ReplicaSpec
    from jevserve.sim.cluster_run import ClusterSetup
    from jevserve.sim.engine import SIM_MODEL_VERSION
    from jevserve.sim.profile import load_profile
    from jevserve.sim.resumable import count_reused

    started = time.perf_counter()
    routers = _names(args.router, "router", tuple(n for n in router_names() if n != "utility"))
    sources = _names(args.length_predictions, "length-predictions", PREDICTION_SOURCES)
    if args.predictions is not None:
        sources[0] = "file"
    names = _names(args.replica_profiles, "replica-profiles") if args.replica_profiles else [args.profile] * \
        args.replicas
    profiles = [load_profile(n) for n in names]
    replicas = tuple(ReplicaSpec(p, config) for p in profiles)
    if args.doc is not None:
        check_writable(args.doc, "--doc")  # before the sweep, not after it
    workload = load_workload(args)
    cv = gamma_cv(args.arrivals, args.cv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows, described = [], {}
    for index, source in enumerate(sources):
        requests, described[source] = with_predictions(workload, source, args)
        setup = ClusterSetup(replicas, tuple(requests), slo, args.policy, args.aging_s,
                             args.decision_delay_ms / 1000, args.default_output_tokens, args.arrivals, cv)
        base = {"version": [SIM_MODEL_VERSION, CLUSTER_RESULTS_VERSION], "profiles": [asdict(p) for p in profiles],
                "config": asdict(config), "slo": asdict(slo), "workload": args.workload,
                "requests": [(r.request_id, r.num_prompt_tokens, r.num_output_tokens, r.predicted_output_tokens)
                             for r in requests],
                "policy": [args.policy, args.aging_s, args.decision_delay_ms], "default": args.default_output_tokens,
                "arrivals": [args.arrivals, cv]}
        path = args.out / f"runs-{_fingerprint(base)}.jsonl"
        cells = cells_for(routers if index == 0 else ["latency"], args.rates, args.seeds)
        # a resumed sweep's bar starts at the runs it reuses (at 0 it read as if nothing was kept)
        with tqdm(total=len(cells), initial=count_reused(cells, path), desc=f"cluster ({source} predictions)",
                  unit="run", disable=None) as bar:
            found = run_cluster_cells(cells, setup, results_path=path, jobs=args.jobs, on_done=lambda _: bar.update())
            bar.update(len(cells) - bar.n)
        rows += [(source, run) for run in found]
        print(f"runs: {path}")
    agg = aggregate(rows, sources[0], args.rates)
    meta = {
        "command": "jevserve sim " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["sim"]
        else "jevserve sim cluster",
        "replicas": [p.name for p in profiles], "num_requests": len(workload),
        "workload": args.workload + (f" (replies x {args.output_scale:g})" if args.output_scale else ""),
        "mean_prompt_tokens": float(np.mean([r.num_prompt_tokens for r in workload])),
        "mean_output_tokens": float(np.mean([r.num_output_tokens for r in workload])),
        "engine": f"max_num_seqs={config.max_num_seqs}, max_num_batched_tokens={config.max_num_batched_tokens}, "
        f"kv_admission={config.kv_admission}, head_of_line_blocking={config.head_of_line_blocking}",
        "kv_blocks": [config.num_kv_blocks or p.num_kv_blocks(config.block_size) for p in profiles],
        "slo": ", ".join(f"{k} <= {v:g}" for k, v in asdict(slo).items() if v is not None),
        "policy": args.policy, "aging_s": args.aging_s, "decision_delay_ms": args.decision_delay_ms,
        "arrivals": args.arrivals, "seeds": list(args.seeds), "rates": list(args.rates), "predictions": described,
        "default_output_tokens": args.default_output_tokens, "wall_s": time.perf_counter() - started,
    }
    summary_path = args.out / f"summary-{args.section}.json"
    summary_path.write_text(json_report.dumps({"meta": meta, "aggregate": agg}, indent=1, default=str) + "\n")
    print(f"summary: {summary_path}")
    for router, data in agg["routers"].items():
        for entry in data["per_rate"]:  # the means over seeds; intervals and estimator figures are in the summary
            keeps = {True: "keeps up", False: "falls behind", None: "too short to tell"}[entry.get("keeps_up")]
            print(f"  {router:>8} at {entry['rate_rps']:g} req/s: attainment {100 * entry['slo_attainment'][0]:.1f}%,"
                  f" p90 TTFT {entry['ttft_p90_ms'][0]:.0f} ms, p99 {entry['ttft_p99_ms'][0]:.0f} ms; {keeps}")
        value, qualifier = data["goodput_rps"]
        behind = [f"{e['rate_rps']:g}" for e in data["per_rate"] if e.get("keeps_up") is False]
        print(f"  {router:>8}: max rate with >= 90% attainment, keeping up, {qualifier}{value:.0f} req/s"
              + (f" (falls behind at {', '.join(behind)} req/s)" if behind else ""))
    untold = sorted({e["rate_rps"] for d in agg["routers"].values() for e in d["per_rate"]
                     if e.get("keeps_up") is None})
    if untold:
        print(f"note: at {', '.join(f'{r:g}' for r in untold)} req/s the runs are too short to tell whether the "
              "cluster keeps up (their second half of arrivals lasts under five median end-to-end latencies or holds "
              "too few arrivals for a 5% test, and the waiting queue does not grow); the goodput gives them the "
              "doubt; rerun with more --num-requests to know",
              file=sys.stderr)
    if args.doc is not None:
        images = plot(agg, args.img_dir, args.section)
        write_section(args.doc, args.section, agg, meta, images)
        print(f"report: {args.doc} (section {args.section!r}); plots: " + ", ".join(str(p) for p in images))
    return 0
