"""The shells of `jevserve plan table` and `jevserve plan validate`: caching, progress, printing, report."""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
import time
from dataclasses import asdict

from jevserve.sim.engine import SIM_MODEL_VERSION

PLAN_RESULTS_VERSION = 1  # bump when a change alters plan results, so cached runs are not reused


def _fingerprint(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _slo_text(slo) -> str:
    return ", ".join(f"{k} <= {v:g}" for k, v in asdict(slo).items() if v is not None)


def _command() -> str:
    return "jevserve " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["plan"] \
        else "jevserve plan"


def run_table(args: argparse.Namespace, requests) -> int:
    """`jevserve plan table`: analytic and simulated replicas per profile and queue policy."""
    from jevserve.argtypes import check_writable

    if args.doc is not None:
        check_writable(args.doc, "--doc")  # before the work, not after it
    from tqdm import tqdm

    from jevserve.plan.planner import CapacityModel, PlanError, plan_replicas, replicas_for, with_delay_named
    from jevserve.plan.report import deployment_table, write_section
    from jevserve.plan.table import TableContext, parse_policy, search_replicas, simulated_attainment
    from jevserve.serving.registry import reads_predictions
    from jevserve.sim.engine_args import engine_config_from_args, slo_from_args
    from jevserve.sim.profile import load_profile
    from jevserve.sim.workloads.predictions import noisy_oracle

    started = time.perf_counter()
    config, slo = engine_config_from_args(args), slo_from_args(args)
    names = args.profile if args.profile is not None else args.profiles  # --profile: a table of that one
    profiles = {p.name: p for p in (load_profile(n.strip()) for n in names.split(",") if n.strip())}
    policies = {}
    for text in args.policies:  # names checked when the arguments were parsed
        choice = parse_policy(text, aging_s=args.aging_s, decision_delay_s=args.decision_delay_ms / 1000)
        policies[choice.label] = choice
    tau = None  # predictions are drawn only for a policy that reads them (a constant-length workload has none)
    if any(reads_predictions(choice.name) for choice in policies.values()):
        requests, tau = noisy_oracle(list(requests), kendall_tau=args.oracle_tau, seed=args.workload_seed)
    ctx = TableContext(tuple(requests), profiles, policies, config, slo, args.rate, args.router, 256.0)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / ("table-" + _fingerprint({
        "version": [SIM_MODEL_VERSION, PLAN_RESULTS_VERSION], "profiles": {k: asdict(v) for k, v in profiles.items()},
        "policies": {k: asdict(v) for k, v in policies.items()}, "config": asdict(config), "slo": asdict(slo),
        "rate": args.rate, "router": args.router, "requests": [asdict(r) for r in requests]}) + ".jsonl")
    rows = []
    for name, profile in profiles.items():
        for label, choice in policies.items():
            model = CapacityModel(requests, profile, config, ttft_slo_s=slo.ttft_ms / 1000,
                                  decision_delay_s=choice.decision_delay_s)
            capacity = model.capacity(args.attainment)
            try:
                analytic = plan_replicas(args.rate, capacity, gpus_per_replica=args.gpus_per_replica,
                                          max_load=args.max_load).replicas
            except PlanError as exc:
                # one policy the target is out of reach for (its decision delay, say) leaves the other rows standing
                reason = with_delay_named(str(exc), choice.decision_delay_s, slo.ttft_ms / 1000)
                print(f"jevserve plan: note: {name} {label}: {reason}", file=sys.stderr)
                rows.append({"profile": name, "policy": label, "analytic_replicas": None,
                             "stable_replicas": replicas_for(args.rate, capacity.bound.rate_rps),
                             "floor_replicas": None, "max_load": args.max_load, "simulated_replicas": None,
                             "probes": {}, "gpus_per_replica": args.gpus_per_replica, "unplannable": reason})
                continue
            stable = replicas_for(args.rate, capacity.bound.rate_rps)
            # a finite run close to saturation can meet the target before its queue has grown: the search goes no
            # lower than the count that keeps each replica within --max-load of its bound, as the analytic plan does
            floor = replicas_for(args.rate, args.max_load * capacity.bound.rate_rps)
            found, probes = None, {}
            if not args.no_simulate:
                with tqdm(desc=f"{name} {label}", unit="probe", disable=None) as bar:
                    attainment = simulated_attainment(name, label, ctx, seeds=args.seeds, results_path=path,
                                                      jobs=args.jobs)
                    found, probes = search_replicas(
                        attainment, analytic, args.attainment, floor=floor,
                        on_probe=lambda n, a, bar=bar: (bar.update(), bar.set_postfix(n=n, att=a)))
            rows.append({"profile": name, "policy": label, "analytic_replicas": analytic, "stable_replicas": stable,
                         "floor_replicas": floor, "max_load": args.max_load,
                         "simulated_replicas": found, "probes": {str(k): v for k, v in probes.items()},
                         "gpus_per_replica": args.gpus_per_replica})
    table = deployment_table(rows)
    # what the table was computed for, printed with it (it was in the --doc section only): a table read alone said
    # neither the rate nor the SLO its replica counts meet
    computed_for = (f"total rate {args.rate:g} req/s; workload {args.workload} ({len(requests)} requests); SLO "
                    f"{_slo_text(slo)} for {100 * args.attainment:g}% of requests; engine "
                    f"max_num_seqs={config.max_num_seqs}, max_num_batched_tokens={config.max_num_batched_tokens}")
    print(f"{computed_for}\n\n{table}")
    summary = {"command": _command(), "rate_rps": args.rate, "rows": rows, "kendall_tau": tau, "runs_file": str(path),
               "wall_s": time.perf_counter() - started}
    (args.out / f"summary-{args.section}.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.doc is not None:
        body = "\n".join([
            f"Regenerate: `{summary['command']}`", "",
            f"- {computed_for}",
            f"- simulated clusters: router {args.router}, arrival seeds {list(args.seeds)} (attainment is their mean); "
            + (f"plf predictions: noisy oracle, Kendall tau {tau:.3f}; aging {args.aging_s:g} s; plf decision delay "
             f"{args.decision_delay_ms:g} ms" if tau is not None else "no policy reads predictions"),
            f"- run time: {summary['wall_s']:.0f} s wall for this command (cached runs are reused)", "", table])
        write_section(args.doc, args.section, body)
        print(f"report: {args.doc} (section {args.section!r})")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """`jevserve plan validate`: the model against the simulator, per workload."""
    from jevserve.argtypes import check_writable

    if args.doc is not None:
        check_writable(args.doc, "--doc")  # before the work, not after it
    from tqdm import tqdm

    from jevserve.plan.planner import CapacityModel
    from jevserve.plan.report import attainment_table, validation_table, write_section
    from jevserve.plan.validate import CASES, build_case, cells_for, compare, run_validation_cell
    from jevserve.sim.engine_args import engine_config_from_args, slo_from_args
    from jevserve.sim.profile import load_profile
    from jevserve.sim.resumable import count_reused, run_keyed

    started = time.perf_counter()
    config, slo = engine_config_from_args(args), slo_from_args(args)
    profile = load_profile(args.profile)
    cases = {n: build_case(n, profile, config, slo) for n in (x.strip() for x in args.cases.split(",")) if n}
    results = []
    for name, case in cases.items():
        model = CapacityModel(case.requests, profile, case.config, ttft_slo_s=slo.ttft_ms / 1000)
        cells = cells_for(case, model.bound().rate_rps, args.seeds)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / ("validate-" + _fingerprint({
            "version": [SIM_MODEL_VERSION, PLAN_RESULTS_VERSION], "profile": asdict(profile),
            "config": asdict(case.config), "slo": asdict(slo), "requests": [asdict(r) for r in case.requests]})
            + ".jsonl")
        with tqdm(total=len(cells), initial=count_reused(cells, path), desc=f"validate {name}", unit="run",
                  disable=None) as bar:
            rows = run_keyed(cells, run_validation_cell, cases, results_path=path, jobs=args.jobs,
                             on_done=lambda _, bar=bar: bar.update())
            bar.update(len(cells) - bar.n)
        results.append({**compare(case, model, rows, args.attainment), "about": CASES[name]["about"]})
    table, per_rate = validation_table(results), attainment_table(results)
    print(table)
    out = {"command": _command(), "results": results, "wall_s": time.perf_counter() - started}
    (args.out / "validation.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    if args.doc is not None:
        body = "\n".join([
            f"Regenerate: `{out['command']}`", "",
            f"- profile {profile.name}; SLO {_slo_text(slo)} for {100 * args.attainment:g}%; FCFS; Poisson arrivals, "
            f"seeds {list(args.seeds)}; one replica per run",
            f"- run time: {out['wall_s']:.0f} s wall for this command (cached runs are reused)", "",
            table, "", "Attainment at each rate of the sweep (simulated: mean over seeds):", "", per_rate])
        write_section(args.doc, "validation", body)
        print(f"report: {args.doc} (section 'validation')")
    return 0
