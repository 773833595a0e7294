"""Run (policy, rate, seed) cells in parallel, appending each finished cell to a JSONL file so a rerun resumes."""

from __future__ import annotations

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
from jevserve.sim.resumable import run_keyed
from jevserve.sim.run import simulate_summary, with_arrivals


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A queue policy with its settings and the label results carry (e.g. `spf+aging`)."""

    name: str
    aging_s: float | None = None
    decision_delay_s: float = 0.0
    options: tuple[tuple[str, float], ...] = ()  # further settings of the policy, e.g. (("stretch", 0.3),)

    @property
    def label(self) -> str:
        """`name`, or `name+aging` when aging is on, with any options, e.g. `plf-edf(stretch=0.3)`."""
        extra = "(" + ",".join(f"{k}={v:g}" for k, v in self.options) + ")" if self.options else ""
        return self.name + extra + ("+aging" if self.aging_s is not None else "")


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


def run_cell(cell: Cell, context: SweepContext) -> dict:
    """Simulate one cell and return its summary with the cell's identity."""
    arrivals = make_arrivals(context.arrival_process, len(context.requests), cell.rate_rps, cell.seed)
    requests = with_arrivals(context.requests, arrivals)
    policy = make_queue_policy(
        cell.policy.name, aging_s=cell.policy.aging_s, decision_delay_s=cell.policy.decision_delay_s,
        **dict(cell.policy.options),
    )
    started = time.process_time()
    summary = simulate_summary(requests, context.profile, policy, context.config, context.slo)
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
    return run_keyed(cells, run_cell, context, results_path=results_path, jobs=jobs, on_done=on_done)
