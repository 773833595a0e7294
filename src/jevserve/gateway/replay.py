"""`jevserve gateway replay`: re-decide logged requests with another decider or config; count changed actions."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from jevserve.gateway.config import GatewayConfig
from jevserve.gateway.decider import Decider, make_decider
from jevserve.gateway.decisions import run_decisions
from jevserve.gateway.errors import UnknownModelError
from jevserve.gateway.log import read_log


def compare(logged: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, str]:
    """decision → "old→new" action for one record (equal actions give "a→a")."""
    old = {v["decision"]: v["action"] for v in (logged or {}).get("verdicts", [])}
    now = {v["decision"]: v["action"] for v in new.get("verdicts", [])}
    return {d: f"{old.get(d, '-')}→{now.get(d, '-')}" for d in sorted(set(old) | set(now))}


async def _replay(records: list[dict[str, Any]], config: GatewayConfig, decider: Decider) -> dict[str, Any]:
    transitions: dict[str, Counter] = {}
    num_skipped = 0
    old_ms, new_ms = [], []
    for record in records:
        messages = record.get("messages") or []
        try:
            report = await run_decisions(
                messages, config=config, decider=decider, tools=record.get("tools"), model=record.get("model")
            )
        except UnknownModelError:
            num_skipped += 1
            continue
        logged = record.get("decisions")
        if logged:
            old_ms.append(float(logged.get("decision_ms", 0.0)))
        new_ms.append(report.decision_ms)
        for decision, change in compare(logged, report.to_dict()).items():
            transitions.setdefault(decision, Counter())[change] += 1
    decisions = {}
    for decision, counts in transitions.items():
        changed = sum(n for t, n in counts.items() if t.split("→")[0] != t.split("→")[1])
        decisions[decision] = {
            "num_changed": changed,
            "num_total": sum(counts.values()),
            "transitions": dict(counts.most_common()),
        }
    return {
        "num_records": len(records),
        "num_skipped": num_skipped,
        "decider": decider.name,
        "decisions": decisions,
        "median_decision_ms_logged": _median(old_ms),
        "median_decision_ms_replayed": _median(new_ms),
    }


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def replay_log(
    path: str | Path, config: GatewayConfig, *, limit: int | None = None, decider: Decider | None = None
) -> dict[str, Any]:
    """Re-decide the first `limit` records of the log at `path`; returns counts of action changes per decision."""
    records = read_log(path)[:limit]
    decider = decider or make_decider(config.decider)

    async def run() -> dict[str, Any]:
        try:
            return await _replay(records, config, decider)
        finally:
            await decider.aclose()

    return asyncio.run(run())


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table of the replay."""
    lines = [
        f"replayed {report['num_records'] - report['num_skipped']} of {report['num_records']} logged requests "
        f"with {report['decider']} ({report['num_skipped']} skipped: their model is not in the config)",
        f"{'decision':<10} {'changed':>8} {'of':>6}   transitions (logged→replayed)",
    ]
    for decision, row in sorted(report["decisions"].items()):
        moves = ", ".join(f"{t} ×{n}" for t, n in row["transitions"].items())
        lines.append(f"{decision:<10} {row['num_changed']:>8} {row['num_total']:>6}   {moves}")
    lines.append(
        f"median decision ms: logged {report['median_decision_ms_logged']}, "
        f"replayed {report['median_decision_ms_replayed']}"
    )
    return "\n".join(lines)
