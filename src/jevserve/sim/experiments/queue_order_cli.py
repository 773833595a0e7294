"""The shell around the queue-order experiment: calibration cache, resumable sweep, summary, plots, report."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import time
from dataclasses import asdict

import numpy as np

from jevserve.sim.engine import SIM_MODEL_VERSION, EngineConfig
from jevserve.sim.experiments.queue_order import (
    DEFAULT_RATES,
    QueueOrderSetup,
    aggregate,
    build_requests,
    calibrate_step_scale,
    save_json,
    scaled_profile,
)
from jevserve.sim.experiments.report import generated_section, plot, write_doc
from jevserve.sim.experiments.sweep import Cell, SweepContext, run_cells
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import load_profile


def _fingerprint(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def run_queue_order(args: argparse.Namespace, config: EngineConfig, slo: Slo) -> int:
    """Run `jevserve sim queue-order` with parsed arguments; returns the exit status."""
    from tqdm import tqdm

    started = time.perf_counter()
    setup = QueueOrderSetup(
        profile=load_profile(args.profile), num_requests=args.num_requests, rates=args.rates or DEFAULT_RATES,
        seeds=args.seeds, aging_s=args.aging_s, decision_delay_s=args.decision_delay_ms / 1000,
        predictions_path=args.predictions, config=config, slo=slo, step_scale=args.step_scale,
        target_fcfs_goodput=args.target_fcfs_goodput,
    )
    requests, predictions = build_requests(setup)
    args.out.mkdir(parents=True, exist_ok=True)
    base = {"sim_model_version": SIM_MODEL_VERSION, "profile": asdict(setup.profile), "config": asdict(config),
            "slo": asdict(slo), "requests": setup.num_requests, "workload_seed": setup.workload_seed,
            "predictions": predictions}

    calibration_reused = False
    if setup.step_scale is not None:
        scale, note = setup.step_scale, "fixed with --step-scale"
    else:
        calibration_key = _fingerprint({**base, "rates": setup.rates, "seeds": setup.seeds,
                                        "target": setup.target_fcfs_goodput})
        path = args.out / f"calibration-{calibration_key}.json"
        if path.exists():
            scale = json.loads(path.read_text())["step_scale"]
            calibration_reused = True
            print(f"step scale {scale:.4f} (cached in {path})")
        else:
            print(f"calibrating the step-time scale so FCFS goodput = {setup.target_fcfs_goodput} req/s ...")
            scale = calibrate_step_scale(setup, requests, args.jobs)
            save_json({"step_scale": scale, "target_fcfs_goodput": setup.target_fcfs_goodput}, path)
        note = f"calibrated so FCFS goodput = {setup.target_fcfs_goodput} req/s"

    profile = scaled_profile(setup.profile, scale)
    context = SweepContext(tuple(requests), profile, config, slo)
    cells = [Cell(p, r, s) for p in setup.policies() for r in setup.rates for s in setup.seeds]
    runs_path = args.out / f"runs-{_fingerprint({**base, 'scale': scale})}.jsonl"
    num_reused = len(runs_path.read_text().splitlines()) if runs_path.exists() else 0
    with tqdm(total=len(cells), desc="queue-order", unit="run") as bar:
        rows = run_cells(cells, context, results_path=runs_path, jobs=args.jobs, on_done=lambda _: bar.update())
        bar.update(len(cells) - bar.n)
    agg = aggregate(rows, setup)
    wall = time.perf_counter() - started

    meta = {
        "command": "jevserve sim " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["sim"]
        else "jevserve sim queue-order",
        "num_requests": setup.num_requests, "workload_seed": setup.workload_seed,
        "mean_prompt_tokens": float(np.mean([r.num_prompt_tokens for r in requests])),
        "mean_output_tokens": float(np.mean([r.num_output_tokens for r in requests])),
        "seeds": list(setup.seeds), "profile": setup.profile.name,
        "engine": f"max_num_seqs={config.max_num_seqs}, max_num_batched_tokens={config.max_num_batched_tokens}, "
        f"{profile.num_kv_blocks(config.block_size) if config.num_kv_blocks is None else config.num_kv_blocks} KV "
        f"blocks, kv_admission={config.kv_admission}, head_of_line_blocking={config.head_of_line_blocking}",
        "slo": ", ".join(f"{k} <= {v:g}" for k, v in asdict(slo).items() if v is not None),
        "predictions": predictions, "decision_delay_ms": setup.decision_delay_s * 1000, "aging_s": setup.aging_s,
        "step_scale": scale, "step_scale_note": note, "wall_s": wall, "num_cells": len(cells),
        "num_reused": min(num_reused, len(cells)), "calibration_reused": calibration_reused,
        "jobs": args.jobs or os.cpu_count() or 1, "runs_file": str(runs_path),
    }
    save_json({"meta": meta, "policies": agg}, args.out / "summary.json")
    images = plot(agg, args.img_dir)
    write_doc(args.doc, generated_section(agg, meta, images, args.doc))
    print(f"results: {runs_path}, {args.out / 'summary.json'}; report: {args.doc}; plots: "
          + ", ".join(str(p) for p in images))
    for label, data in agg.items():
        value, qualifier = data["goodput_rps"]
        print(f"  {label:>12}: goodput {qualifier}{value:.2f} req/s")
    return 0
