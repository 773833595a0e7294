"""Tables, plots and the markdown report of the queue-order experiment, next to the published numbers."""

from __future__ import annotations

import math
from pathlib import Path

# Published (Qwen3-8B, vLLM priority scheduler, one H200, 2,000 ShareGPT requests), as quoted in issue 3.
# Keys: (metric, rate or None) -> {policy: value}; a tuple value is a published range.
PUBLISHED: dict[tuple[str, float | None], dict[str, float | tuple[float, float]]] = {
    ("slo_attainment", 1.30): {"fcfs": 0.75},
    ("slo_attainment", 1.42): {"fcfs": 0.42, "spf": 0.925, "plf": 0.972, "tlf": 0.992},
    ("ttft_p90_s", 1.54): {"spf": 6.1, "plf": 0.23, "tlf": 0.09},
    ("ttft_p99_s", 1.30): {"spf": 52.9, "plf": 2.7, "tlf": 0.4},
    ("goodput_rps", None): {"fcfs": 1.13, "plf": (1.30, 1.36)},
}
POLICY_TITLES = {"fcfs": "FCFS", "spf": "shortest prompt", "plf": "predicted length", "tlf": "true length"}
METRIC_TITLES = {
    "slo_attainment": "SLO attainment",
    "ttft_p90_s": "p90 TTFT (s)",
    "ttft_p99_s": "p99 TTFT (s)",
    "goodput_rps": "goodput (req/s, max rate with >= 90% attainment)",
}


def _fmt(value: float, metric: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if metric == "slo_attainment":
        return f"{100 * value:.1f}%"
    return f"{value:.3g}" if metric.endswith("_s") else f"{value:.2f}"


def _with_interval(stat: tuple[float, float, float], metric: str) -> str:
    mean, low, high = stat
    if math.isnan(low):
        return _fmt(mean, metric)
    return f"{_fmt(mean, metric)} [{_fmt(low, metric)}, {_fmt(high, metric)}]"


def _at(agg: dict, label: str, rate: float, metric: str) -> tuple[float, float, float]:
    """The metric at `rate`, or nan when the sweep did not include that rate."""
    return next((e[metric] for e in agg[label]["per_rate"] if abs(e["rate_rps"] - rate) < 1e-9),
                (math.nan, math.nan, math.nan))


def comparison_table(agg: dict) -> str:
    """Published numbers next to simulated ones (mean [95% interval over arrival seeds])."""
    lines = ["| metric | policy | published | simulated | simulated, with aging |", "|---|---|---|---|---|"]
    for (metric, rate), values in PUBLISHED.items():
        where = f" at {rate:.2f} req/s" if rate is not None else ""
        for policy, published in values.items():
            pub = f"{published[0]:.2f}–{published[1]:.2f}" if isinstance(published, tuple) else _fmt(published, metric)
            cells = []
            for label in (policy, f"{policy}+aging"):
                if metric == "goodput_rps":
                    value, qualifier = agg[label]["goodput_rps"]
                    _, low, high = agg[label]["goodput_interval"]
                    text = f"{qualifier}{value:.2f}"
                    cells.append(text if math.isnan(low) else f"{text} [{low:.2f}, {high:.2f}]")
                else:
                    cells.append(_with_interval(_at(agg, label, rate, metric), metric))
            title = f"{METRIC_TITLES[metric]}{where}"
            lines.append(f"| {title} | {POLICY_TITLES[policy]} | {pub} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def rate_table(agg: dict, rates: tuple[float, ...], metric: str) -> str:
    """One metric for every policy (rows) at every rate (columns), means over seeds."""
    header = "| policy | " + " | ".join(f"{r:.2f}" for r in rates) + " |"
    lines = [header, "|---|" + "---|" * len(rates)]
    for label, data in agg.items():
        cells = [_fmt(e[metric][0], metric) for e in data["per_rate"]]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goodput_table(agg: dict) -> str:
    """DistServe goodput and the longest wait at the top rate, per policy."""
    lines = ["| policy | goodput (req/s) | per seed | longest wait at top rate (s) |", "|---|---|---|---|"]
    for label, data in agg.items():
        value, qualifier = data["goodput_rps"]
        seeds = ", ".join(f"{q}{g:.2f}" for g, q in data["goodput_by_seed"])
        wait = data["per_rate"][-1]["max_wait_s"][0]
        lines.append(f"| {label} | {qualifier}{value:.2f} | {seeds} | {wait:.1f} |")
    return "\n".join(lines)


def plot(agg: dict, img_dir: Path, stem: str = "queue-order") -> list[Path]:
    """Attainment vs rate, and p90/p99 TTFT vs rate on a log scale; returns the PNG paths."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img_dir.mkdir(parents=True, exist_ok=True)
    colors = {"fcfs": "tab:gray", "spf": "tab:orange", "plf": "tab:blue", "tlf": "tab:green"}

    def lines(ax, metric: str, scale: float = 1.0) -> None:
        for label, data in agg.items():
            name, aged = label.split("+")[0], label.endswith("+aging")
            rates = [e["rate_rps"] for e in data["per_rate"]]
            values = [e[metric][0] * scale for e in data["per_rate"]]
            ax.plot(rates, values, marker="o", ms=3, color=colors[name], linestyle="--" if aged else "-",
                    label=f"{POLICY_TITLES[name]}{' + aging' if aged else ''}")
        ax.set_xlabel("request rate (req/s)")
        ax.grid(alpha=0.3)

    fig, ax = plt.subplots(figsize=(6.5, 4))
    lines(ax, "slo_attainment", 100)
    ax.axhline(90, color="black", lw=0.8, ls=":")
    ax.set_ylabel("SLO attainment (%)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    attainment = img_dir / f"{stem}-attainment.png"
    fig.savefig(attainment, dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, metric, title in ((axes[0], "ttft_p90_s", "p90 TTFT"), (axes[1], "ttft_p99_s", "p99 TTFT")):
        lines(ax, metric)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.set_ylabel(f"{title} (s, log scale)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    ttft = img_dir / f"{stem}-ttft.png"
    fig.savefig(ttft, dpi=120)
    plt.close(fig)
    return [attainment, ttft]


GENERATED_START = "<!-- generated by `jevserve sim queue-order`: start -->"
GENERATED_END = "<!-- generated by `jevserve sim queue-order`: end -->"


def generated_section(agg: dict, meta: dict, images: list[Path], doc_path: Path) -> str:
    """The markdown the command regenerates: setup, calibration, the comparison and the full tables."""
    rates = tuple(e["rate_rps"] for e in next(iter(agg.values()))["per_rate"])
    rel = [Path(_relative(p, doc_path.parent)) for p in images]
    slo = meta["slo"]
    parts = [
        GENERATED_START,
        "",
        f"Regenerate: `{meta['command']}`",
        "",
        "## Setup",
        "",
        f"- workload: {meta['num_requests']} ShareGPT requests (test split, sample seed {meta['workload_seed']}; "
        f"mean prompt {meta['mean_prompt_tokens']:.0f}, mean reply {meta['mean_output_tokens']:.0f} Qwen3 tokens)",
        f"- arrivals: Poisson at {', '.join(f'{r:.2f}' for r in rates)} req/s; arrival seeds {meta['seeds']}, the "
        "same arrival times for every policy",
        f"- profile: `{meta['profile']}`; engine: {meta['engine']}",
        f"- SLO: {slo}; goodput = highest rate with >= 90% attainment (DistServe), interpolated between rates",
        f"- predictions for 'predicted length': {_describe(meta['predictions'])}; decision delay "
        f"{meta['decision_delay_ms']:.0f} ms before such a request is queued",
        f"- aging: promotion to first-come-first-served after {meta['aging_s']:g} s of waiting",
        f"- calibrated knob: step-time scale = {meta['step_scale']:.4f} ({meta['step_scale_note']})",
        f"- run time: {meta['wall_s']:.0f} s wall, calibration included, with {meta['jobs']} processes for "
        f"{meta['num_cells']} simulations" + _reuse_note(meta),
        "",
        "Intervals are 95% Student-t intervals of the mean over arrival seeds (with two seeds they are wide).",
        "",
        "## Published vs simulated",
        "",
        comparison_table(agg),
        "",
        "## Goodput and starvation",
        "",
        goodput_table(agg),
        "",
        "## SLO attainment by rate",
        "",
        rate_table(agg, rates, "slo_attainment"),
        "",
        f"![SLO attainment vs rate]({rel[0].as_posix()})",
        "",
        "## TTFT tails by rate",
        "",
        "p90 TTFT (s):",
        "",
        rate_table(agg, rates, "ttft_p90_s"),
        "",
        "p99 TTFT (s):",
        "",
        rate_table(agg, rates, "ttft_p99_s"),
        "",
        f"![p90 and p99 TTFT vs rate]({rel[1].as_posix()})",
        "",
        "## Longest wait in the queue (s)",
        "",
        rate_table(agg, rates, "max_wait_s"),
        "",
        GENERATED_END,
    ]
    return "\n".join(parts)


def _reuse_note(meta: dict) -> str:
    notes = [f"{meta['num_reused']} simulations reused from an earlier run"] if meta["num_reused"] else []
    notes += ["a cached calibration"] if meta["calibration_reused"] else []
    return f" ({'; '.join(notes)})" if notes else ""


def _describe(predictions: dict) -> str:
    if predictions.get("kind") == "noisy oracle":
        return (f"noisy oracle, Kendall tau {predictions['kendall_tau']:.3f} against the true length "
                f"(target {predictions['target_kendall_tau']})")
    return f"file `{predictions.get('path')}`"


def _relative(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path.resolve(), start.resolve())


def write_doc(doc_path: Path, section: str, title: str = "# Queue order: which request runs next") -> None:
    """Write the generated section into doc_path, keeping any text outside the generated markers."""
    if doc_path.exists():
        text = doc_path.read_text()
        if GENERATED_START in text and GENERATED_END in text:
            head, _, rest = text.partition(GENERATED_START)
            _, _, tail = rest.partition(GENERATED_END)
            doc_path.write_text(head + section + tail)
            return
    doc_path.parent.mkdir(parents=True, exist_ok=True)
    doc_path.write_text(f"{title}\n\n{section}\n")
