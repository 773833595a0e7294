"""Cluster runs as (router, rate, seed) cells in a resumable parallel sweep.

Each finished cell is appended to a JSONL file at once, so an interrupted sweep loses at most the cells in
flight and a rerun skips what is done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jevserve.sim.cluster_run import ClusterSetup, ClusterSummary, run_cluster, summarize_cluster
from jevserve.sim.resumable import run_keyed


@dataclass(frozen=True, slots=True)
class ClusterCell:
    """One cluster run: a router at a rate with an arrival seed."""

    router: str
    rate_rps: float
    seed: int

    @property
    def key(self) -> str:
        """Identifies the cell in a results file."""
        return f"{self.router}|{self.rate_rps:.4f}|{self.seed}"


@dataclass(frozen=True, slots=True)
class RouterRun:
    """One finished cell of a cluster sweep: which router, rate and seed, and what the run gave."""

    key: str
    router: str
    rate_rps: float
    seed: int
    summary: ClusterSummary

    def as_dict(self) -> dict[str, object]:
        """One line of the results file."""
        return {"key": self.key, "router": self.router, "rate_rps": self.rate_rps, "seed": self.seed,
                **self.summary.as_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> RouterRun:
        """Read back a line of the results file."""
        return cls(data["key"], data["router"], data["rate_rps"], data["seed"], ClusterSummary.from_dict(data))


def run_cell(cell: ClusterCell, setup: ClusterSetup) -> dict:
    """Simulate one cell; returns its results-file line (`RouterRun.as_dict`)."""
    result = run_cluster(setup, cell.router, cell.rate_rps, cell.seed)
    return RouterRun(cell.key, cell.router, cell.rate_rps, cell.seed, summarize_cluster(result, setup.slo)).as_dict()


def run_cluster_cells(
    cells: Iterable[ClusterCell],
    setup: ClusterSetup,
    *,
    results_path: Path | None = None,
    jobs: int | None = None,
    on_done: Callable[[dict], None] | None = None,
) -> list[RouterRun]:
    """Run every cluster cell not already in `results_path`; returns the runs of these cells."""
    rows = run_keyed(cells, run_cell, setup, results_path=results_path, jobs=jobs, on_done=on_done)
    return [RouterRun.from_dict(row) for row in rows]


def cells_for(routers: Sequence[str], rates: Sequence[float], seeds: Sequence[int]) -> list[ClusterCell]:
    """Every (router, rate, seed) combination, grouped by rate."""
    return [ClusterCell(r, rate, s) for rate in rates for r in routers for s in seeds]
