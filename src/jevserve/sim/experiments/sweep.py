"""Run (policy, rate, seed) cells in parallel, appending each finished cell to a JSONL file so a rerun resumes."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from jevserve.serving.registry import make_queue_policy
from jevserve.serving.types import Request
from jevserve.sim.arrivals import make_arrivals
from jevserve.sim.engine import EngineConfig
from jevserve.sim.metrics import Slo
from jevserve.sim.profile import Profile
from jevserve.sim.run import simulate_summary, with_arrivals


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A queue policy with its settings and the label results carry (e.g. `spf+aging`)."""

    name: str
    aging_s: float | None = None
    decision_delay_s: float = 0.0

    @property
    def label(self) -> str:
        """`name`, or `name+aging` when aging is on."""
        return self.name + ("+aging" if self.aging_s is not None else "")


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulation: a policy at a rate with an arrival seed."""

    policy: PolicySpec
    rate_rps: float
    seed: int

    @property
    def key(self) -> str:
        """Identifies the cell in a results file."""
        return f"{self.policy.label}|{self.rate_rps:.4f}|{self.seed}"


@dataclass(frozen=True, slots=True)
class SweepContext:
    """What every cell shares: the requests (no arrival times yet), profile, engine settings, SLO, process."""

    requests: tuple[Request, ...]
    profile: Profile
    config: EngineConfig
    slo: Slo
    arrival_process: str = "poisson"


_CONTEXT: SweepContext | None = None  # set in each worker process by _init_worker


def _init_worker(context: SweepContext) -> None:
    global _CONTEXT
    _CONTEXT = context


def run_cell(cell: Cell, context: SweepContext | None = None) -> dict:
    """Simulate one cell and return its summary with the cell's identity."""
    ctx = context or _CONTEXT
    assert ctx is not None, "run_cell needs a context (passed, or set by the worker initializer)"
    arrivals = make_arrivals(ctx.arrival_process, len(ctx.requests), cell.rate_rps, cell.seed)
    requests = with_arrivals(ctx.requests, arrivals)
    policy = make_queue_policy(
        cell.policy.name, aging_s=cell.policy.aging_s, decision_delay_s=cell.policy.decision_delay_s
    )
    started = time.process_time()
    summary = simulate_summary(requests, ctx.profile, policy, ctx.config, ctx.slo)
    # CPU time of this process, so the cost of a sweep can be told apart from other work on the machine
    summary["cpu_s"] = time.process_time() - started
    return {"key": cell.key, "policy": cell.policy.label, "rate_rps": cell.rate_rps, "seed": cell.seed, **summary}


def run_cells(
    cells: Iterable[Cell],
    context: SweepContext,
    *,
    results_path: Path | None = None,
    jobs: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Run every cell not already in `results_path`, in `jobs` processes; returns all rows for these cells."""
    cells = list(cells)
    done: dict[str, dict] = {}
    if results_path is not None and results_path.exists():
        for line in results_path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["key"]] = row
    todo = [c for c in cells if c.key not in done]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(todo) or 1))
    pool = None
    sink = results_path.open("a") if results_path is not None else None
    try:
        if jobs == 1:
            results = (run_cell(c, context) for c in todo)
        else:
            pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_init_worker, initargs=(context,))
            results = pool.imap_unordered(run_cell, todo)
        for row in results:
            done[row["key"]] = row
            if sink is not None:
                sink.write(json.dumps(row) + "\n")
                sink.flush()  # a finished cell is on disk before the next one is taken
            if on_done is not None:
                on_done(row)
    finally:
        if pool is not None:
            pool.terminate()
        if sink is not None:
            sink.close()
    return [done[c.key] for c in cells]
