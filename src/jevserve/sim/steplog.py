"""Step logs: one row per engine step with what it computed and how long it took (the input of calibration)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from jevserve.sim.entities import Batch
from jevserve.sim.errors import TraceError
from jevserve.sim.observer import Observer

STEPLOG_COLUMNS = (
    "num_prefill_tokens",
    "num_decode_tokens",
    "decode_context_tokens",
    "prefill_attention_pairs",
    "step_time_us",
)


class StepLogger(Observer):
    """Records every step (expanding decode runs into their single steps) as rows of STEPLOG_COLUMNS."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, int, float]] = []

    def on_step(self, replica_id: int, batch: Batch, num_steps: int) -> None:
        """Append one row per step of the batch."""
        ends = np.asarray(batch.ends_s, dtype=np.float64)
        durations_us = np.diff(np.concatenate(([batch.start_s], ends))) * 1e6
        for i, duration in enumerate(durations_us):
            context = batch.decode_context_tokens + i * batch.num_decode_tokens
            self.rows.append(
                (batch.num_prefill_tokens, batch.num_decode_tokens, context, batch.prefill_attention_pairs,
                 float(duration))
            )

    def write_csv(self, path: Path) -> None:
        """Write the rows as CSV with a header."""
        write_steplog(self.rows, path)


def write_steplog(rows: list[tuple], path: Path) -> None:
    """Write step-log rows (in STEPLOG_COLUMNS order) as CSV."""
    with path.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(STEPLOG_COLUMNS)
        writer.writerows(rows)


def read_steplog(path: Path) -> np.ndarray:
    """Rows of a step-log CSV as an (n, 5) float array, every value checked."""
    if not path.is_file():
        what = "is a folder" if path.is_dir() else "does not exist"
        raise TraceError(f"step log {str(path)!r} {what}; write one with `jevserve sim run --step-log FILE`")
    try:
        return _read_steplog(path)
    except UnicodeDecodeError as exc:
        raise TraceError(f"step log {str(path)!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                         "expected a UTF-8 CSV") from None


def _read_steplog(path: Path) -> np.ndarray:
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in STEPLOG_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(
                f"step log {path}: missing column(s) {', '.join(missing)}; expected a header with "
                f"{', '.join(STEPLOG_COLUMNS)}"
            )
        out = []
        for line_no, row in enumerate(reader, start=2):
            values = []
            for column in STEPLOG_COLUMNS:
                try:
                    value = float(row[column])
                except (TypeError, ValueError):
                    value = -1.0
                if not value >= 0 or not np.isfinite(value):
                    raise TraceError(f"{path}:{line_no}: {column} = {row[column]!r}; expected a number >= 0")
                values.append(value)
            out.append(values)
    if not out:
        raise TraceError(f"step log {path} has no rows")
    return np.asarray(out, dtype=np.float64)
