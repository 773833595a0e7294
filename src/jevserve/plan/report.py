"""Markdown for `jevserve plan`: the plan itself, the validation table and the deployment table."""

from __future__ import annotations

import math
from pathlib import Path

from jevserve.docsections import write_block
from jevserve.plan.planner import Plan


def plan_text(plan: Plan, *, workload: str, slo_ms: float) -> str:
    """The answer of `jevserve plan` in a few lines."""
    c = plan.capacity
    b = c.bound
    roofline = (f", roofline: memory bandwidth {b.memory_bandwidth_rps:.3g}, peak compute {b.peak_compute_rps:.3g}"
                if b.peak_compute_rps != float("inf") else "")
    return "\n".join([
        f"workload: {workload}",
        f"one replica of {c.profile}: stable up to {b.rate_rps:.3g} req/s "
        f"(batch slots {b.slots_rps:.3g}, KV memory {b.kv_rps:.3g}, compute {b.compute_rps:.3g}{roofline}); binding: "
        f"{b.binding} ({100 * b.token_work_share:.0f}% of each step is token work, mean step "
        f"{1000 * b.step_s:.1f} ms at the bound)",
        f"SLO TTFT <= {slo_ms:g} ms for {100 * c.attainment_target:g}% of requests: up to {c.slo_rate_rps:.3g} "
        f"req/s per replica (FCFS waiting-time model, {c.servers} requests held at once)",
        f"answer: {plan.replicas} replica{'s' if plan.replicas != 1 else ''} ({plan.gpus} GPU"
        f"{'s' if plan.gpus != 1 else ''}) for {plan.rate_rps:g} req/s, "
        f"{plan.per_replica_rate_rps:.3g} req/s each = {100 * plan.utilisation:.0f}% of the stability bound; "
        + _limit(plan),
    ])


def _limit(plan) -> str:
    """What sets the replica count: one replica is the least there is, so a load it carries with room to spare is
    limited by nothing yet (saying "the stability bound" at 6 % of it misled)."""
    per_replica_limit = min(plan.capacity.slo_rate_rps, plan.max_load * plan.capacity.bound.rate_rps)
    if plan.replicas == 1 and plan.per_replica_rate_rps < per_replica_limit:
        # "with room for 2.18 req/s (the SLO first)" read as a riddle: say which limit that rate is
        return (f"one replica is the least, and it has room for up to {per_replica_limit:.3g} req/s, where "
                f"{_named(plan)} is reached")
    flag = " (--max-load)" if plan.limited_by == "stability bound" and plan.max_load < 1 else ""
    return f"limited by {_named(plan)}{flag}"


def _named(plan) -> str:
    if plan.limited_by != "stability bound":
        return f"the {plan.limited_by}"
    return "the stability bound" if plan.max_load >= 1 else f"{100 * plan.max_load:g}% of the stability bound"


def _pct_diff(model: float, measured: float) -> str:
    return "—" if not measured or math.isnan(measured) else f"{100 * (model / measured - 1):+.1f}%"


def validation_table(results: list[dict]) -> str:
    """Analytic vs simulated saturation rate and SLO rate per workload."""
    lines = [
        "| workload | binds (model) | saturation (req/s): model | simulated | diff | SLO rate (req/s): model | "
        "simulated | diff | throughput at 1.5x the bound (simulated) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        sim_slo = r["measured_slo_rate_rps"]
        qualifier = r["measured_slo_rate_qualifier"]
        overload = r["overload_throughput_rps"][0]
        lines.append(
            f"| {r['about']} | {r['binding']} | {r['analytic_saturation_rps']:.3g} | "
            f"{r['measured_saturation_rps']:.3g} | "
            f"{_pct_diff(r['analytic_saturation_rps'], r['measured_saturation_rps'])} | "
            f"{r['analytic_slo_rate_rps']:.3g} | {qualifier}{sim_slo:.3g} | "
            f"{'outside the sweep' if qualifier in ('<', '>=') else _pct_diff(r['analytic_slo_rate_rps'], sim_slo)} | "
            f"{overload:.3g} ({r['num_preemptions_overload']:.0f} preemptions) |"
        )
    return "\n".join(lines)


def attainment_table(results: list[dict]) -> str:
    """Analytic vs simulated attainment at each rate of the validation sweep."""
    lines = ["| workload | rate (req/s) | fraction of the bound | attainment: model | simulated |",
             "|---|---|---|---|---|"]
    for r in results:
        for e in r["per_rate"]:
            lines.append(f"| {r['case']} | {e['rate_rps']:.3g} | {e['rate_rps'] / r['analytic_saturation_rps']:.2f} | "
                         f"{100 * e['analytic']:.1f}% | {100 * e['measured']:.1f}% |")
    return "\n".join(lines)


def deployment_table(rows: list[dict]) -> str:
    """Replicas and GPUs per profile and queue policy, analytic (FCFS) and simulated."""
    lines = ["| profile | queue policy | replicas for stability (model) | replicas, model (FCFS SLO) | "
             "replicas, simulated | GPUs, simulated | simulated attainment at that count | at one replica fewer |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("unplannable"):
            lines.append(f"| {r['profile']} | {r['policy']} | {r['stable_replicas']} | none meets the target even "
                         "unloaded | not simulated | — | — | — |")
            continue
        n = r["simulated_replicas"]
        found = "not simulated" if not r["probes"] else "not found" if n is None else n
        below = r["probes"].get(str(n - 1)) if n is not None else None
        at = r["probes"].get(str(n)) if n is not None else None
        if below is not None:
            fewer = f"{100 * below:.1f}%"
        else:
            floor = r.get("floor_replicas", r["stable_replicas"])
            if n is None or n - 1 >= floor:
                fewer = "—"
            elif n - 1 < r["stable_replicas"]:
                fewer = "not run: unstable"
            else:
                fewer = f"not run: over {100 * r.get('max_load', 1):g}% of the bound"
        lines.append(
            f"| {r['profile']} | {r['policy']} | {r['stable_replicas']} | {r['analytic_replicas']} | {found} | "
            f"{'—' if n is None else n * r['gpus_per_replica']} | {'—' if at is None else f'{100 * at:.1f}%'} | "
            f"{fewer} |"
        )
    return "\n".join(lines)


def write_section(doc: Path, section: str, body: str) -> None:
    """Replace (or append) the generated section `section` of `doc`, leaving the rest of the file alone."""
    start = f"<!-- generated by `jevserve plan`: {section} start -->"
    end = f"<!-- generated by `jevserve plan`: {section} end -->"
    write_block(doc, start, end, f"{start}\n\n{body}\n\n{end}", "# Capacity planning")
