"""The shell around the queue-order experiment: arguments, calibration cache, resumable sweep, summary, report.

Each scenario writes under `--out/<scenario>/`: `calibration-<key>.json` (the calibrated knob),
`runs-<key>.jsonl` (one line per finished simulation, so a rerun resumes) and `summary.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from jevserve.argtypes import check_writable, nonnegative_float, positive_float, positive_int
from jevserve.lab.queue_order.experiment import (
    DEFAULT_RATES,
    QueueOrderSetup,
    aggregate,
    build_context,
    calibrate_knob,
    output_length_stats,
    run_length_check,
    save_json,
)
from jevserve.lab.queue_order.kv_arithmetic import arithmetic_table
from jevserve.lab.queue_order.report import generated_section, plot, write_doc
from jevserve.lab.queue_order.scenarios import DEFAULT_SCENARIOS, KNOBS, SCENARIOS, Scenario, get_scenario
from jevserve.lab.queue_order.sweep import Cell, run_cells
from jevserve.sim.argtypes import arrivals_arg
from jevserve.sim.engine import SIM_MODEL_VERSION, EngineConfig
from jevserve.sim.engine_args import engine_config_from_args
from jevserve.sim.errors import SimError
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import load_profile
from jevserve.sim.workloads.lengths import count_capped, scale_output_lengths
from jevserve.sim.workloads.sharegpt import sample_sharegpt


def _names(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated scenario names, e.g. thinking,two-seqs")
    return names


def add_arguments(
    qo: argparse.ArgumentParser, floats: Callable[[str], tuple[float, ...]], ints: Callable[[str], tuple[int, ...]]
) -> None:
    """The options of `jevserve sim queue-order`; engine options default to each scenario's own settings."""
    qo.add_argument("--scenarios", type=_names, default=DEFAULT_SCENARIOS,
                    help="comma-separated scenarios, the first one the report's headline: 'thinking' (vLLM "
                    "defaults with prefix caching, reply lengths x a calibrated multiplier), 'thinking-recompute' "
                    "(the same without prefix caching), 'two-seqs' (max_num_seqs=2, step times x a calibrated "
                    f"scale) (default: {','.join(DEFAULT_SCENARIOS)})")
    qo.add_argument("--predictions", type=Path, default=None,
                    help="JSONL of request_id -> predicted_tokens for the ShareGPT test split "
                    "(default: a noisy oracle with Kendall tau 0.6)")
    qo.add_argument("--seeds", type=ints, default=(0, 1), help="arrival seeds, e.g. 0,1,2,3 (default: 0,1)")
    qo.add_argument("--rates", type=floats, default=None, help="request rates (default: 0.90,1.00,1.05,...,1.54)")
    qo.add_argument("--num-requests", type=positive_int("--num-requests"), default=2000,
                    help="requests per run (default: 2000)")
    qo.add_argument("--arrivals", type=arrivals_arg(allow_trace=False), default="poisson",
                    help="arrival process: poisson, gamma:CV or mmpp:BURST_RATIO:BURST_SHARE:MEAN_PHASE_GAPS "
                    "(e.g. mmpp:4:0.2:100); every rate scales one realisation per seed (default: poisson)")
    qo.add_argument("--aging-s", type=positive_float("--aging-s"), default=10.0,
                    help="fixed aging threshold, seconds (default: 10)")
    qo.add_argument("--decision-delay-ms", type=nonnegative_float("--decision-delay-ms"), default=92.0,
                    help="delay before a predicted-length request is queued (default: 92)")
    qo.add_argument("--length-doublings", type=int, choices=(0, 1, 2), default=0,
                    help="run length: send the sampled requests, then the same again in another order, doubling "
                    "the run this many times (default: 0); the run-length check doubles it once more")
    qo.add_argument("--no-run-length-check", action="store_true",
                    help="skip rerunning the rates around each goodput with twice the requests")
    qo.add_argument("--output-scale", type=float, default=None,
                    help="'thinking': fix the reply-length multiplier instead of calibrating it")
    qo.add_argument("--step-scale", type=float, default=None,
                    help="'two-seqs': fix the step-time scale instead of calibrating it")
    qo.add_argument("--target-fcfs-goodput", type=positive_float("--target-fcfs-goodput"), default=1.13,
                    help="calibration target (default: 1.13)")
    qo.add_argument("--out", type=Path, default=Path("results/cache/queue-order"),
                    help="folder for the calibration, runs (resumable) and summaries (default: %(default)s)")
    qo.add_argument("--doc", type=Path, default=Path("docs/queue-order.md"),
                    help="markdown report to write, its plots beside it in img/ (default: docs/queue-order.md under "
                    "the working directory: in a checkout, the shipped report)")
    qo.add_argument("--section", metavar="NAME", default=None,
                    help="write the report as the variant NAME's block of --doc (its own markers, headings one "
                    "level down) instead of the main run's")
    qo.add_argument("--img-dir", type=Path, default=Path("docs/img"), help="folder for the plots")
    qo.add_argument("--jobs", type=positive_int("--jobs"), default=None, help="worker processes (default: all cores)")


def _fingerprint(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def scenario_config(scenario: Scenario, args: argparse.Namespace) -> EngineConfig:
    """The scenario's engine settings with the overrides given on the command line."""
    return engine_config_from_args(args, scenario.config)


def _knob(setup: QueueOrderSetup, folder: Path, base: dict, jobs: int | None) -> tuple[float, str, bool]:
    """The knob value, how it was set, and whether a cached calibration was reused."""
    if setup.knob_value is not None:
        return setup.knob_value, f"fixed with --{setup.scenario.knob.replace('_', '-')}", False
    note = f"calibrated so FCFS goodput = {setup.target_fcfs_goodput} req/s"
    key = _fingerprint({**base, "rates": setup.rates, "seeds": setup.seeds, "target": setup.target_fcfs_goodput,
                        "knob": setup.scenario.knob, "bracket": setup.scenario.bracket})
    path = folder / f"calibration-{key}.json"
    if path.exists():
        value = json.loads(path.read_text())["value"]
        print(f"{KNOBS[setup.scenario.knob]} {value:.4f} (cached in {path})")
        return value, note, True
    print(f"[{setup.scenario.name}] calibrating the {KNOBS[setup.scenario.knob]} so FCFS goodput = "
          f"{setup.target_fcfs_goodput} req/s ...")
    value = calibrate_knob(setup, jobs)
    save_json({"knob": setup.scenario.knob, "value": value, "target_fcfs_goodput": setup.target_fcfs_goodput},
              path)
    return value, note, False


def run_scenario(scenario: Scenario, args: argparse.Namespace, slo: Slo) -> dict:
    """Calibrate (or reuse) the knob, run the resumable sweep and return the aggregate with its metadata."""
    from tqdm import tqdm

    from jevserve.sim.resumable import count_reused

    started = time.perf_counter()
    config = scenario_config(scenario, args)
    setup = QueueOrderSetup(
        scenario=scenario, profile=load_profile(args.profile or scenario.profile), config=config,
        num_requests=args.num_requests, rates=args.rates or DEFAULT_RATES, seeds=args.seeds, aging_s=args.aging_s,
        decision_delay_s=args.decision_delay_ms / 1000, predictions_path=args.predictions, slo=slo,
        knob_value=args.output_scale if scenario.knob == "output_scale" else args.step_scale,
        target_fcfs_goodput=args.target_fcfs_goodput, arrivals=args.arrivals, doublings=args.length_doublings,
    )
    folder = args.out / scenario.name
    folder.mkdir(parents=True, exist_ok=True)
    base = {"sim_model_version": SIM_MODEL_VERSION, "scenario": scenario.name, "profile": asdict(setup.profile),
            "config": asdict(config), "slo": asdict(slo), "requests": setup.num_requests,
            "workload_seed": setup.workload_seed, "max_model_len": scenario.max_model_len,
            "arrivals": setup.arrivals, "goodput_rule": "steady-1", "doublings": setup.doublings}
    value, note, reused = _knob(setup, folder, base, args.jobs)
    calibrated_s = time.perf_counter() - started

    context, predictions = build_context(setup, value)
    cells = [Cell(p, r, s) for p in setup.policies() for r in setup.rates for s in setup.seeds]
    runs_path = folder / f"runs-{_fingerprint({**base, 'knob': value, 'predictions': predictions})}.jsonl"
    num_reused = count_reused(cells, runs_path)
    sweep_started = time.perf_counter()
    with tqdm(total=len(cells), initial=num_reused, desc=f"queue-order {scenario.name}", unit="run",
              disable=None) as bar:
        rows = run_cells(cells, context, results_path=runs_path, jobs=args.jobs, on_done=lambda _: bar.update())
        bar.update(len(cells) - bar.n)
    agg = aggregate(rows, setup)
    check = [] if args.no_run_length_check else run_length_check(
        agg, context, setup, results_path=runs_path.with_name("double-" + runs_path.name), jobs=args.jobs)
    engine = (f"max_num_seqs={config.max_num_seqs}, max_num_batched_tokens={config.max_num_batched_tokens}, "
              f"{config.num_kv_blocks or context.profile.num_kv_blocks(config.block_size)} KV blocks of "
              f"{config.block_size} tokens, kv_admission={config.kv_admission}, "
              f"head_of_line_blocking={config.head_of_line_blocking}, prefix_caching={config.prefix_caching}")
    meta = {
        "scenario": scenario.name, "title": scenario.title, "profile": setup.profile.name, "engine": engine,
        "knob": scenario.knob, "knob_title": KNOBS[scenario.knob], "knob_value": value, "knob_note": note,
        "calibration_target": setup.target_fcfs_goodput if setup.knob_value is None else None,
        "calibration_reused": reused, "calibration_wall_s": calibrated_s,
        "sweep_wall_s": time.perf_counter() - sweep_started, "num_cells": len(cells),
        "num_reused": num_reused, "runs_file": str(runs_path), "predictions": predictions,
        "mean_prompt_tokens": float(np.mean([r.num_prompt_tokens for r in context.requests])),
        "output_tokens": output_length_stats(context.requests),
        "num_capped": count_capped(context.requests, scenario.max_model_len) if scenario.knob == "output_scale"
        else 0, "max_model_len": scenario.max_model_len, "rates": list(setup.rates), "seeds": list(setup.seeds),
        "arrivals": setup.arrivals, "num_requests_per_run": len(context.requests),
    }
    save_json({"meta": meta, "policies": agg, "run_length_check": check}, folder / "summary.json")
    return {"meta": meta, "policies": agg, "run_length_check": check}


def _kv_table(scenario: Scenario, value: float, args: argparse.Namespace) -> str:
    """Steady-state KV arithmetic: ShareGPT replies vs scaled replies, without and with the context terms."""
    base = sample_sharegpt(args.num_requests, seed=0, split="test")
    scaled = scale_output_lengths(base, value, max_model_len=scenario.max_model_len)
    plain, attn = load_profile("qwen3-8b-h200"), load_profile(args.profile or scenario.profile)
    cases = [("ShareGPT replies, `qwen3-8b-h200`", base, plain),
             (f"replies x {value:.2f}, `qwen3-8b-h200` (no context terms)", scaled, plain),
             (f"replies x {value:.2f}, `{attn.name}`", scaled, attn)]
    return arithmetic_table(cases, (1.10, 1.30, 1.42))


def _check_knobs_are_read(scenarios: list[Scenario], args: argparse.Namespace) -> None:
    """Refuse a knob no chosen scenario reads (`--output-scale` without 'thinking', `--step-scale` without
    'two-seqs'), rather than run without it as if it had been applied."""
    knobs = {s.knob for s in scenarios}
    for knob in ("output_scale", "step_scale"):
        if getattr(args, knob) is not None and knob not in knobs:
            readers = ", ".join(n for n in SCENARIOS if SCENARIOS[n].knob == knob)
            raise SimError(f"--{knob.replace('_', '-')} fixes the {KNOBS[knob]}, which only the scenarios {readers} "
                           f"have; --scenarios {','.join(s.name for s in scenarios)} runs none of them")


def run_queue_order(args: argparse.Namespace) -> int:
    """Run `jevserve sim queue-order` with parsed arguments; returns the exit status."""
    check_writable(args.doc, "--doc")  # before the runs, not after them
    started = time.perf_counter()
    scenarios = [get_scenario(name) for name in args.scenarios]
    _check_knobs_are_read(scenarios, args)
    slo = Slo(args.slo_ttft_ms, args.slo_tpot_ms, args.slo_e2el_ms)
    results = {s.name: run_scenario(s, args, slo) for s in scenarios}
    images = {name: plot(r["policies"], args.img_dir, stem=f"queue-order-{name}") for name, r in results.items()}
    thinking = next((s for s in scenarios if s.knob == "output_scale"), None)
    common = {
        "command": "jevserve sim " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["sim"]
        else "jevserve sim queue-order",
        "num_requests": args.num_requests, "doublings": args.length_doublings,
        "slo": ", ".join(f"{k} <= {v:g}" for k, v in asdict(slo).items() if v is not None),
        "decision_delay_ms": args.decision_delay_ms, "aging_s": args.aging_s, "wall_s": time.perf_counter() - started,
        "jobs": args.jobs or os.cpu_count() or 1,
        "kv_table": _kv_table(thinking, results[thinking.name]["meta"]["knob_value"], args) if thinking else None,
    }
    write_doc(args.doc, generated_section(results, common, images, args.doc, args.section), section=args.section)
    print(f"report: {args.doc}; results under {args.out}")
    for name, result in results.items():
        meta = result["meta"]
        print(f"[{name}] {meta['knob_title']} = {meta['knob_value']:.4f} ({meta['knob_note']}); sweep "
              f"{meta['sweep_wall_s']:.0f} s for {meta['num_cells']} simulations")
        for label, data in result["policies"].items():
            value, qualifier = data["goodput_rps"]
            print(f"  {label:>12}: goodput {qualifier}{value:.2f} req/s")
    return 0
