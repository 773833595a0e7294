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
from jevserve.sim.metrics import RunSummary, Slo
from jevserve.sim.profile import Profile
from jevserve.sim.resumable import run_keyed
from jevserve.sim.run import SimulationSummary, simulate_summary, with_arrivals
from jevserve.sim.steady import KeepUp


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


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One finished cell of a sweep: which policy, rate and seed, and what the run gave."""

    key: str  # the cell's key in the results file
    policy: str  # the policy's label
    rate_rps: float
    seed: int
    summary: SimulationSummary
    cpu_s: float  # CPU time of the simulation, so a sweep's cost can be told apart from other work

    @property
    def metrics(self) -> RunSummary:
        """The run's serving metrics."""
        return self.summary.metrics

    @property
    def keep_up(self) -> KeepUp:
        """Whether the engine kept up (the steady-state verdict)."""
        return self.summary.keep_up

    def as_dict(self) -> dict[str, object]:
        """One line of the results file."""
        return {"key": self.key, "policy": self.policy, "rate_rps": self.rate_rps, "seed": self.seed,
                **self.summary.as_dict(), "cpu_s": self.cpu_s}

    @classmethod
    def from_dict(cls, data: dict) -> PolicyRun:
        """Read back a line of the results file."""
        return cls(data["key"], data["policy"], data["rate_rps"], data["seed"], SimulationSummary.from_dict(data),
                   data["cpu_s"])


def run_cell(cell: Cell, context: SweepContext) -> dict:
    """Simulate one cell; returns its results-file line (`PolicyRun.as_dict`)."""
    arrivals = make_arrivals(context.arrival_process, len(context.requests), cell.rate_rps, cell.seed)
    requests = with_arrivals(context.requests, arrivals)
    policy = make_queue_policy(
        cell.policy.name, aging_s=cell.policy.aging_s, decision_delay_s=cell.policy.decision_delay_s,
        **dict(cell.policy.options),
    )
    started = time.process_time()
    summary = simulate_summary(requests, context.profile, policy, context.config, context.slo)
    return PolicyRun(cell.key, cell.policy.label, cell.rate_rps, cell.seed, summary,
                     time.process_time() - started).as_dict()


def run_cells(
    cells: Iterable[Cell],
    context: SweepContext,
    *,
    results_path: Path | None = None,
    jobs: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[PolicyRun]:
    """Run every cell not already in `results_path`, in `jobs` processes; returns the runs of these cells."""
    rows = run_keyed(cells, run_cell, context, results_path=results_path, jobs=jobs, on_done=on_done)
    return [PolicyRun.from_dict(row) for row in rows]
