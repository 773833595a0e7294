"""What every benchmark shares: timing rounds, the machine's load while it ran, resumable runs, and the result
written as JSON (benchmarks/results/NAME.json) and as a generated section of a doc, next to the command that
produced it.

    from benchmarks.harness import Checkpoint, time_rounds, watch_load, write_report

    with watch_load() as load:
        timing = time_rounds(lambda: simulate(requests), rounds=5, warmup=1)
    write_report("sim_speed", {"single_run": timing.as_dict()}, table, doc=DOCS / "sim.md", load=load)

The numbers of a benchmark are measured, never edited: a doc section is rewritten whole by the script that owns it,
and its first line names the command, the machine and its load.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.docsections import write_block

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class Load:
    """The machine's load at one instant: other work on a shared machine slows every timing down."""

    when_utc: str  # ISO 8601, seconds
    num_cpus: int
    loadavg_1m: float  # runnable processes averaged over the last minute (os.getloadavg)
    loadavg_5m: float
    loadavg_15m: float


def load_now() -> Load:
    """The load average and CPU count now."""
    one, five, fifteen = os.getloadavg()
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return Load(when, os.cpu_count() or 1, round(one, 2), round(five, 2), round(fifteen, 2))


@dataclass
class LoadWatch:
    """The load before a measurement and after it (`after` is None until the measurement ends)."""

    before: Load
    after: Load | None = None
    started_s: float = field(default_factory=time.perf_counter)
    wall_s: float | None = None  # how long the watched block ran

    def note(self) -> str:
        """One line for a doc: the CPUs and the 1-minute load average before and after."""
        after = f", {self.after.loadavg_1m:.1f} after" if self.after else ""
        took = f" ({self.wall_s:.0f} s)" if self.wall_s is not None else ""
        return f"{self.before.num_cpus} CPUs; 1-minute load average {self.before.loadavg_1m:.1f} before{after}{took}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {"before": asdict(self.before), "after": asdict(self.after) if self.after else None,
                "wall_s": self.wall_s}


@contextmanager
def watch_load() -> Iterator[LoadWatch]:
    """Record the load before the block and after it."""
    watch = LoadWatch(load_now())
    try:
        yield watch
    finally:
        watch.after = load_now()
        watch.wall_s = round(time.perf_counter() - watch.started_s, 3)


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {"num_cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "machine": platform.machine()}


def latency_summary(seconds: Sequence[float], percentiles: Sequence[float] = (50, 99)) -> dict[str, float | int]:
    """Percentiles and maximum in milliseconds (`p50_ms`, `p99_ms`, `max_ms`) and the count `n`; NaN when empty."""
    values = np.asarray(seconds, dtype=float) * 1000
    summary: dict[str, float | int] = {}
    for q in percentiles:
        summary[f"p{q:g}_ms"] = float(np.percentile(values, q)) if values.size else math.nan
    summary["max_ms"] = float(values.max()) if values.size else math.nan
    summary["n"] = int(values.size)
    return summary


@dataclass(frozen=True)
class Timing:
    """Wall-clock and CPU seconds of each timed round (warm-up rounds left out)."""

    wall_s: tuple[float, ...]
    cpu_s: tuple[float, ...]  # this process's CPU time (time.process_time): threads of this process included

    @property
    def median_s(self) -> float:
        """Median wall-clock seconds of a round."""
        return float(np.median(self.wall_s))

    @property
    def min_s(self) -> float:
        """Fastest round: the least disturbed by other work on the machine."""
        return min(self.wall_s)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: every round, and median, min, max and median CPU."""
        return {"rounds": len(self.wall_s), "median_s": self.median_s, "min_s": self.min_s,
                "max_s": max(self.wall_s), "median_cpu_s": float(np.median(self.cpu_s)),
                "wall_s": list(self.wall_s), "cpu_s": list(self.cpu_s)}


def time_rounds(run: Callable[[], object], *, rounds: int = 5, warmup: int = 1) -> Timing:
    """Call `run` `warmup` times untimed (caches, lazy loads), then `rounds` times, timing each call."""
    if rounds < 1 or warmup < 0:
        raise ValueError(f"rounds must be >= 1 and warmup >= 0, got rounds={rounds}, warmup={warmup}")
    for _ in range(warmup):
        run()
    walls, cpus = [], []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return Timing(tuple(walls), tuple(cpus))


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that ran this benchmark, as a reader would type it from the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve() if argv else Path("?")
    shown = script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT) else argv[0]
    return shlex.join(["python", shown, *argv[1:]])


def _finite(value: Any) -> Any:
    """`value` with every NaN or infinity replaced by None, so the file stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_report(
    name: str,
    result: Mapping[str, Any],
    markdown: str,
    *,
    doc: Path,
    load: LoadWatch | None = None,
    command: str | None = None,
    results_dir: Path = RESULTS,
    title: str | None = None,
) -> Path:
    """Write `results_dir/NAME.json` (the result with its command, machine and load) and replace the section NAME
    of `doc` with `markdown`, headed by the command and the load (a new doc starts with `title`); returns the JSON
    file's path."""
    command = command or command_line()
    record = {"name": name, "command": command, "machine": machine(), "load": load.as_dict() if load else None,
              "result": result}
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / f"{name}.json"
    path.write_text(json.dumps(_finite(record), indent=2, allow_nan=False) + "\n")
    header = f"Command: `{command}`" + (f"; {load.note()}" if load else "") + "."
    start, end = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    block = f"{start}\n{header}\n\n{markdown.strip()}\n{end}"
    write_block(doc, start, end, block, title=title or f"# {doc.stem}")
    return path


class Checkpoint:
    """Finished cases of a long run, one JSON line each, so an interrupted run resumes where it stopped.

    The first line holds the run's settings; a rerun with other settings refuses to mix its cases with these (start
    over with `fresh=True`). Each case is flushed to disk as soon as it is added, so a kill loses at most the case
    being measured.
    """

    def __init__(self, path: Path, settings: Mapping[str, Any], *, fresh: bool = False) -> None:
        self.path = path
        self.settings = json.loads(json.dumps(_finite(dict(settings))))
        self._cases: dict[str, Any] = {}
        if path.exists() and not fresh:
            text = path.read_text()
            if not text.endswith("\n"):  # killed mid-write: drop the partial line; its case is measured again
                text = text[: text.rfind("\n") + 1]
                path.write_text(text)
            lines = text.splitlines()
            stored = json.loads(lines[0])["settings"] if lines else None
            if stored != self.settings:
                raise ValueError(f"{path} holds a run with other settings ({stored}); pass fresh=True to start over")
            for line in lines[1:]:
                case = json.loads(line)
                self._cases[case["key"]] = case["record"]
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"settings": self.settings}) + "\n")

    def done(self, key: str) -> bool:
        """True when the case `key` was finished in this run or an earlier one."""
        return key in self._cases

    def add(self, key: str, record: Mapping[str, Any]) -> None:
        """Store a finished case (appended and flushed at once)."""
        clean = _finite(dict(record))
        with self.path.open("a") as fh:
            fh.write(json.dumps({"key": key, "record": clean}, allow_nan=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self._cases[key] = clean

    def records(self) -> dict[str, Any]:
        """Every finished case by key, in the order they finished."""
        return dict(self._cases)
