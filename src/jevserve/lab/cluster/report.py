"""Aggregation, plots and the markdown section of a `jevserve sim cluster` sweep."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from jevserve.docsections import write_block
from jevserve.lab.cluster.sweep import RouterRun
from jevserve.sim.stats import max_rate_meeting, mean_interval, steady_goodput
from jevserve.sim.steady import verdict_as_far_as_told

ATTAINMENT_TARGET = 0.9
# Per-rate metrics of the report: name -> how to read it from one run.
_METRICS: dict[str, Callable[[RouterRun], float]] = {
    "slo_attainment": lambda r: r.summary.metrics.slo_attainment,
    "ttft_p90_ms": lambda r: r.summary.metrics.ttft_ms.p90,
    "ttft_p99_ms": lambda r: r.summary.metrics.ttft_ms.p99,
    "forward_mape": lambda r: r.summary.estimator.forward.mape,
    "forward_bias": lambda r: r.summary.estimator.forward.bias,
    "queued_prefill_mape": lambda r: r.summary.estimator.queued_prefill.mape,
    "forward_us_median": lambda r: r.summary.estimator.forward.us_median,
    "queued_prefill_us_median": lambda r: r.summary.estimator.queued_prefill.us_median,
    "route_us_median": lambda r: r.summary.estimator.route_us_median,
    "mean_running": lambda r: r.summary.estimator.mean_running,
    "busiest_share": lambda r: max(x.num_requests for x in r.summary.per_replica) / r.summary.metrics.num_requests,
}


def _per_rate(rows: list[RouterRun], rates: Sequence[float]) -> list[dict]:
    out = []
    for rate in rates:
        at = [r for r in rows if abs(r.rate_rps - rate) < 1e-9]
        if at:
            told = [verdict_as_far_as_told(r.summary.keep_up, r.summary.too_short) for r in at
                    if r.summary.keep_up is not None]
            # falls behind if any seed does; keeps up if every seed says so; else it cannot tell (None)
            keeps = None if len(told) < len(at) else (
                False if any(k is False for k, _ in told) else True if all(k for k, _ in told) else None)
            out.append({"rate_rps": rate, "num_seeds": len(at),
                        **{name: mean_interval([get(r) for r in at]) for name, get in _METRICS.items()},
                        "keeps_up": keeps,
                        "keep_up_margin": min(m for _, m in told) if len(told) == len(at) else None})
    return out


def aggregate(rows: list[tuple[str, RouterRun]], main_source: str, rates: Sequence[float]) -> dict:
    """Per router (main prediction source): per-rate means with 95% intervals over seeds and the highest rate
    with >= 90% attainment; per prediction source: the latency router's estimator quality. `rows` pairs each run
    with the source of its length predictions."""
    routers: dict[str, dict] = {}
    for router in dict.fromkeys(r.router for source, r in rows if source == main_source):
        per_rate = _per_rate([r for source, r in rows if r.router == router and source == main_source], rates)
        attainment = [e["slo_attainment"][0] for e in per_rate]
        rates_run = [e["rate_rps"] for e in per_rate]
        if not per_rate:
            goodput = (math.nan, "")
        elif all(e["keep_up_margin"] is not None for e in per_rate):
            # a rate counts only where the cluster does not fall behind (a rate that cannot tell is given the doubt,
            # and the report says so)
            goodput = steady_goodput(rates_run, attainment, [e["keeps_up"] is not False for e in per_rate],
                                     ATTAINMENT_TARGET, margins=[e["keep_up_margin"] for e in per_rate])
        else:  # runs stored without a verdict
            goodput = max_rate_meeting(rates_run, attainment, ATTAINMENT_TARGET)
        routers[router] = {"per_rate": per_rate, "goodput_rps": goodput}
    estimator = {source: _per_rate([r for s, r in rows if r.router == "latency" and s == source], rates)
                 for source in dict.fromkeys(s for s, _ in rows)}
    return {"main_source": main_source, "routers": routers, "estimator": estimator}


def _seeds_sentence(num_seeds: int) -> str:
    if num_seeds == 1:
        return "One arrival seed: each cell is one run, without an interval (give `--seeds` two or more for one)."
    if num_seeds == 2:  # t(0.975, 1 df) = 12.7: brackets that read as a bug unless the page says why
        return ("Means over arrival seeds with 95% Student-t intervals in brackets. Two seeds make them ±12.7 "
                "standard errors wide; they are shown as computed, so one may pass its metric's range (an "
                "attainment over 100%, a latency below 0): more seeds narrow them.")
    return "Means over arrival seeds with 95% Student-t intervals in brackets."


def _interval(stat, scale: float = 1.0, digits: int = 0, pct: bool = False) -> str:
    mean, low, high = stat
    unit = "%" if pct else ""
    mult = 100.0 if pct else scale

    def f(x: float) -> str:
        return f"{x * mult:.{digits}f}{unit}"

    return f(mean) if math.isnan(low) else f"{f(mean)} [{f(low)}, {f(high)}]"


def router_table(agg: dict) -> str:
    """SLO attainment and p90/p99 TTFT per router and rate."""
    lines = ["| rate (req/s) | router | SLO attainment | p90 TTFT (ms) | p99 TTFT (ms) | busiest replica's share | "
             "keeps up |", "|---|---|---|---|---|---|---|"]
    rates = sorted({e["rate_rps"] for d in agg["routers"].values() for e in d["per_rate"]})
    for rate in rates:
        for router, data in agg["routers"].items():
            e = next((x for x in data["per_rate"] if x["rate_rps"] == rate), None)
            if e is None:
                continue
            lines.append(f"| {rate:g} | {router} | {_interval(e['slo_attainment'], digits=1, pct=True)} | "
                         f"{_interval(e['ttft_p90_ms'])} | {_interval(e['ttft_p99_ms'])} | "
                         f"{_interval(e['busiest_share'], digits=1, pct=True)} | {_keeps(e.get('keeps_up'))} |")
    return "\n".join(lines)


def _keeps(verdict: bool | None) -> str:
    return "–" if verdict is None else ("yes" if verdict else "no")


def goodput_table(agg: dict) -> str:
    """The highest rate with >= 90% attainment, per router."""
    lines = ["| router | max rate with >= 90% SLO attainment, keeping up (req/s) |", "|---|---|"]
    for router, data in agg["routers"].items():
        value, qualifier = data["goodput_rps"]
        lines.append(f"| {router} | {qualifier}{value:.0f} |")
    return "\n".join(lines)


def estimator_table(agg: dict) -> str:
    """Forward-simulation vs queued-prefill estimates of the chosen replica's TTFT (latency router)."""
    lines = ["| predictions | rate (req/s) | forward MAPE | forward bias | queued-prefill MAPE | µs per forward "
             "estimate | µs per queued-prefill estimate | µs per routing decision | running per replica |",
             "|---|---|---|---|---|---|---|---|---|"]
    for source, per_rate in agg["estimator"].items():
        for e in per_rate:
            lines.append(
                f"| {source} | {e['rate_rps']:g} | {_interval(e['forward_mape'], digits=1, pct=True)} | "
                f"{_interval(e['forward_bias'], digits=1, pct=True)} | "
                f"{_interval(e['queued_prefill_mape'], digits=1, pct=True)} | {e['forward_us_median'][0]:.0f} | "
                f"{e['queued_prefill_us_median'][0]:.0f} | {e['route_us_median'][0]:.0f} | "
                f"{e['mean_running'][0]:.0f} |")
    return "\n".join(lines)


def plot(agg: dict, img_dir: Path, section: str) -> list[Path]:
    """Attainment and p99 TTFT against rate, one line per router; returns the image path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for router, data in agg["routers"].items():
        rates = [e["rate_rps"] for e in data["per_rate"]]
        left.plot(rates, [100 * e["slo_attainment"][0] for e in data["per_rate"]], marker="o", label=router)
        right.plot(rates, [e["ttft_p99_ms"][0] for e in data["per_rate"]], marker="o", label=router)
    left.axhline(100 * ATTAINMENT_TARGET, color="grey", linestyle=":", linewidth=1)
    left.set(xlabel="request rate (req/s)", ylabel="SLO attainment (%)", title="SLO attainment")
    right.set(xlabel="request rate (req/s)", ylabel="p99 TTFT (ms)", yscale="log", title="p99 TTFT")
    left.legend()
    fig.tight_layout()
    path = img_dir / f"cluster-{section}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def section_text(agg: dict, meta: dict, images: list[Path], doc: Path) -> str:
    """The generated markdown of one sweep."""
    preds = "; ".join(f"{k}: {v}" for k, v in meta["predictions"].items())
    rel = [os.path.relpath(p, doc.parent) for p in images]
    return "\n".join([
        f"Regenerate: `{meta['command']}`",
        "",
        f"- replicas: {', '.join(meta['replicas'])} (KV blocks {', '.join(str(b) for b in meta['kv_blocks'])}); "
        f"engine: {meta['engine']}; queue policy {meta['policy']}",
        f"- workload: {meta['num_requests']} {meta['workload']} requests "
        f"(mean prompt {meta['mean_prompt_tokens']:.0f}, mean reply {meta['mean_output_tokens']:.0f} tokens); "
        f"{meta['arrivals']} arrivals; seeds {meta['seeds']}",
        f"- SLO: {meta['slo']}; reply-length predictions: {preds}; default reply length without a prediction "
        f"{meta['default_output_tokens']:g} tokens",
        f"- run time: {meta['wall_s']:.0f} s wall for this command (runs already in `--out` are reused, not rerun)",
        "",
        _seeds_sentence(len(meta["seeds"])),
        "",
        router_table(agg),
        "",
        "Keeps up: over the second half of the arrivals, completions keep pace and the waiting queue does not grow, "
        "for every seed (`jevserve.sim.steady`); no: the cluster falls behind, and the goodput below does not count "
        "that rate; –: a run too short for the completion test (its second half of arrivals lasts under five median "
        "end-to-end latencies, or holds too few arrivals for the requests in flight to be counted within 5%) whose "
        "waiting queue does not grow, which cannot tell, and is given the doubt.",
        "",
        goodput_table(agg),
        "",
        *(f"![SLO attainment and p99 TTFT per router]({p})" for p in rel),
        "",
        "Estimator quality on the chosen replica (latency router), MAPE against the realized TTFT of every request:",
        "",
        estimator_table(agg),
        "",
    ])


def write_section(doc: Path, section: str, agg: dict, meta: dict, images: list[Path]) -> None:
    """Replace (or append) the generated section `section` of `doc`, leaving the rest of the file alone."""
    start = f"<!-- generated by `jevserve sim cluster`: {section} start -->"
    end = f"<!-- generated by `jevserve sim cluster`: {section} end -->"
    write_block(doc, start, end, f"{start}\n\n{section_text(agg, meta, images, doc)}\n{end}", "# Cluster routing")
