"""Markdown tables of the queue-order report: published vs simulated side by side, goodput, metrics by rate."""

from __future__ import annotations

import math
from collections.abc import Collection

# Published (Qwen3-8B, vLLM priority scheduler, one H200, 2,000 ShareGPT requests): the reference figures
# docs/queue-order.md compares against.
# Keys: (metric, rate or None) -> {policy: value}; a tuple value is a published range.
PUBLISHED: dict[tuple[str, float | None], dict[str, float | tuple[float, float]]] = {
    ("slo_attainment", 1.30): {"fcfs": 0.75},
    ("slo_attainment", 1.42): {"fcfs": 0.42, "spf": 0.925, "plf": 0.972, "tlf": 0.992},
    ("ttft_p90_s", 1.54): {"spf": 6.1, "plf": 0.23, "tlf": 0.09},
    ("ttft_p99_s", 1.30): {"spf": 52.9, "plf": 2.7, "tlf": 0.4},
    ("goodput_rps", None): {"fcfs": 1.13, "plf": (1.30, 1.36)},
}
POLICY_TITLES = {"fcfs": "FCFS", "spf": "shortest prompt", "plf": "predicted length", "tlf": "true length",
                 "plf-edf": "predicted length, virtual-deadline aging",
                 "plf-relage": "predicted length, own-time threshold aging"}
# The one published number a calibration fits (FCFS goodput); every other published number is a prediction.
FITTED = {("goodput_rps", None, "fcfs")}
METRIC_TITLES = {
    "slo_attainment": "SLO attainment",
    "ttft_p90_s": "p90 TTFT (s)",
    "ttft_p99_s": "p99 TTFT (s)",
    "goodput_rps": "goodput (req/s)",
    "max_wait_s": "longest wait (s)",
    "num_preemptions": "preemptions",
    "keeps_up": "share of seeds keeping up",
    "completion_ratio": "completions / arrivals, second half",
    "long_wait_p999_s": "p99.9 wait of the longest 10% of replies (s)",
}


def fmt(value: float | None, metric: str) -> str:
    """One value as the report prints it: percent for attainment, 3 significant digits for times."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if metric in ("slo_attainment", "keeps_up"):
        return f"{100 * value:.0f}%" if metric == "keeps_up" else f"{100 * value:.1f}%"
    if metric == "completion_ratio":
        return f"{value:.3f}"
    if metric == "num_preemptions":
        return f"{value:.0f}"
    if metric.endswith("_s"):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{value:.2f}"


def _at(agg: dict, label: str, rate: float) -> dict | None:
    """The per-rate entry at `rate`, or None when the sweep did not include that rate."""
    return next((e for e in agg[label]["per_rate"] if abs(e["rate_rps"] - rate) < 1e-9), None)


def _closeness(sim: float, published: float | tuple[float, float], metric: str) -> str:
    """How far a simulated value is from the published one: points, a ratio, or req/s."""
    if isinstance(published, tuple):
        low, high = published
        gap = 0.0 if low <= sim <= high else (sim - low if sim < low else sim - high)
        return f"{gap:+.2f} req/s from the range"
    if metric == "slo_attainment":
        return f"{100 * (sim - published):+.1f} pts"
    if metric == "goodput_rps":
        return f"{sim - published:+.2f} req/s"
    ratio = sim / published
    return f"x{ratio:,.0f}" if ratio >= 10 else f"x{ratio:.2g}"


def _cell(agg: dict, label: str, metric: str, rate: float | None, published) -> str:
    if metric == "goodput_rps":
        value, qualifier = agg[label]["goodput_rps"]
        _, low, high = agg[label]["goodput_interval"]
        seeds = ", ".join(f"{q}{g:.2f}" for g, q in agg[label]["goodput_by_seed"])
        interval = "" if math.isnan(low) else f" [{low:.2f}, {high:.2f}]"
        return f"{qualifier}{value:.2f}{interval}; seeds {seeds} ({_closeness(value, published, metric)})"
    entry = _at(agg, label, rate)
    if entry is None:
        return "—"
    mean, low, high = entry[metric]
    interval = "" if math.isnan(low) else f" [{fmt(low, metric)}, {fmt(high, metric)}]"
    seeds = ", ".join(fmt(v, metric) for v in entry["by_seed"][metric])
    return f"{fmt(mean, metric)}{interval}; seeds {seeds} ({_closeness(mean, published, metric)})"


def side_by_side_table(aggs: dict[str, dict], fitted_in: Collection[str] | None = None,
                       fixed_in: Collection[str] = ()) -> str:
    """Every published number next to each scenario's simulated value (no aging), with how close it comes.

    `fitted_in`: the scenarios whose knob was calibrated to the published number FITTED names (None: all); where the
    knob was calibrated to another target, that number is a prediction too. `fixed_in`: the scenarios whose knob
    was fixed on the command line, where the table cannot tell whether the value came from calibrating these runs."""
    names = list(aggs)
    fitted = set(names if fitted_in is None else fitted_in) & set(names)
    fixed = set(fixed_in) & set(names) - fitted
    lines = ["| metric | policy | published | fitted or predicted | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    for (metric, rate), values in PUBLISHED.items():
        where = f" at {rate:.2f} req/s" if rate is not None else ""
        for policy, published in values.items():
            pub = (f"{published[0]:.2f}–{published[1]:.2f}" if isinstance(published, tuple)
                   else fmt(published, metric))
            cells = [_cell(aggs[n], policy, metric, rate, published) for n in names]
            kind = _fitted_or_predicted(names, fitted, fixed) if (metric, rate, policy) in FITTED else "prediction"
            lines.append(f"| {METRIC_TITLES[metric]}{where} | {POLICY_TITLES[policy]} | {pub} | {kind} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


FIXED_KNOB = "knob fixed by hand: fitted where these runs are the ones it was calibrated on, else a prediction"


def _fitted_or_predicted(names: list[str], fitted: set[str], fixed: set[str]) -> str:
    """The label of the calibration target's row. A knob fixed on the command line may hold a value calibrated on
    these very runs (fitted) or on others (a prediction); the table cannot tell which, so it says what it depends on."""
    if fitted == set(names):
        return "**fitted** (calibration target)"
    if fixed == set(names):
        return FIXED_KNOB
    if not fitted and not fixed:
        return "prediction (knob not calibrated to it)"
    kinds = {"**fitted**": fitted, "knob fixed by hand": fixed, "prediction": set(names) - fitted - fixed}
    return "; ".join(f"{kind} in " + ", ".join(f"`{n}`" for n in names if n in members)
                     for kind, members in kinds.items() if members)


def rate_table(agg: dict, rates: tuple[float, ...], metric: str) -> str:
    """One metric for every policy (rows) at every rate (columns), means over seeds."""
    header = "| policy | " + " | ".join(f"{r:.2f}" for r in rates) + " |"
    lines = [header, "|---|" + "---|" * len(rates)]
    for label, data in agg.items():
        cells = [fmt(e[metric][0], metric) for e in data["per_rate"]]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goodput_table(agg: dict) -> str:
    """Steady-state goodput with its interval and per-seed values, its gain over FCFS, the latency-only
    (DistServe) goodput it replaces, and the longest wait at the top rate."""
    lines = ["| policy | steady-state goodput (req/s) | vs FCFS | 95% interval | per seed | latency-only goodput "
             "(not keeping up counted) | longest wait at top rate (s) |", "|---|---|---|---|---|---|---|"]
    fcfs, fcfs_qualifier = agg.get("fcfs", {}).get("goodput_rps", (math.nan, ""))
    for label, data in agg.items():
        value, qualifier = data["goodput_rps"]
        # a ratio means nothing when either goodput is only bounded by the ends of the sweep
        gain = "—" if qualifier or fcfs_qualifier else f"{100 * (value / fcfs - 1):+.0f}%"
        _, low, high = data["goodput_interval"]
        interval = "—" if math.isnan(low) else f"[{low:.2f}, {high:.2f}]"
        seeds = ", ".join(f"{q}{g:.2f}" for g, q in data["goodput_by_seed"])
        old, old_q = data.get("latency_only_goodput_rps", (math.nan, ""))
        wait = data["per_rate"][-1]["max_wait_s"][0]
        lines.append(f"| {label} | {qualifier}{value:.2f} | {gain} | {interval} | {seeds} | "
                     f"{old_q}{old:.2f} | {wait:,.1f} |")
    return "\n".join(lines)


def run_length_table(rows: list[dict]) -> str:
    """The verdict at the rates around each goodput with the run as given and twice as long."""
    lines = ["| policy | rate | attainment | keeps up | counted | attainment, 2x run | keeps up, 2x | counted, 2x |"
             " same verdict |", "|---|---|---|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no"}
    for r in rows:
        lines.append(f"| {r['policy']} | {r['rate_rps']:.2f} | {100 * r['attainment']:.1f}% | {yes[r['keeps_up']]} | "
                     f"{yes[r['meets']]} | {100 * r['attainment_2x']:.1f}% | {yes[r['keeps_up_2x']]} | "
                     f"{yes[r['meets_2x']]} | {'yes' if r['meets'] == r['meets_2x'] else '**no**'} |")
    return "\n".join(lines)
