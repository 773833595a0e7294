"""Trace replay: requests with arrival times and sizes from a JSONL or CSV file.

Fields: `request_id` (optional, default the row number), `arrival_s` (seconds, optional when arrivals are
generated instead), `prompt_tokens`, `output_tokens`, and optionally `predicted_tokens`.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

from jevserve.json_report import jsonl_lines
from jevserve.serving.types import Request
from jevserve.sim.errors import TraceError

REQUIRED = ("prompt_tokens", "output_tokens")


# a number as a person writes one in ASCII: float() also reads "1_0" as 10, "١٢" as 12 and " inf " as infinity
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?", re.ASCII)


def _number(value: object) -> float:
    """A field's number, NaN for what is none: JSON's true and false are not counts, and a number past a float's
    range reads as infinity (1e400, and an integer of 400 digits, which float() refused with an OverflowError)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return math.nan
    if isinstance(value, str) and not _PLAIN_NUMBER.fullmatch(value.strip()):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.nan


def _said(value: object) -> str:
    """A field's value as an error quotes it, cut short: a 300-digit count was quoted whole."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…{text[-8:]} ({len(text)} characters)"


def _int_field(row: dict, name: str, where: str) -> int:
    value = row.get(name)
    number = _number(value)
    if not (math.isfinite(number) and number >= 1 and number == int(number)):
        raise TraceError(f"{where}: field {name!r} = {_said(value)}; expected an integer >= 1")
    return int(number)


def _row_to_request(row: dict, index: int, where: str, *, need_arrival: bool) -> Request:
    for name in REQUIRED:
        if name not in row or row[name] in ("", None):
            raise TraceError(f"{where}: missing field {name!r}; every row needs {', '.join(REQUIRED)}")
    arrival = row.get("arrival_s")
    if arrival in ("", None):
        if need_arrival:
            raise TraceError(f"{where}: missing field 'arrival_s'; give send times in seconds or generate arrivals")
        arrival_s = 0.0
    else:
        arrival_s = _number(arrival)
        if not (math.isfinite(arrival_s) and arrival_s >= 0):
            raise TraceError(f"{where}: field 'arrival_s' = {_said(arrival)}; expected seconds >= 0")
    predicted = row.get("predicted_tokens")
    if predicted in ("", None):
        predicted_value = None
    else:
        predicted_value = _number(predicted)
        if not (math.isfinite(predicted_value) and predicted_value >= 0):
            raise TraceError(f"{where}: field 'predicted_tokens' = {_said(predicted)}; expected a number >= 0")
    return Request(
        str(row.get("request_id") or index),
        arrival_s,
        _int_field(row, "prompt_tokens", where),
        _int_field(row, "output_tokens", where),
        predicted_value,
    )


def read_trace(path: Path, *, need_arrival: bool = True) -> list[Request]:
    """Requests from a `.jsonl` or `.csv` trace, sorted by arrival time."""
    if not path.is_file():
        what = "is a folder; give a .jsonl or .csv file" if path.is_dir() else "does not exist"
        raise TraceError(f"trace file {str(path)!r} {what}")
    try:
        return _read_trace(path, need_arrival=need_arrival)
    except UnicodeDecodeError as exc:
        raise TraceError(f"trace file {str(path)!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                         "expected a UTF-8 .jsonl or .csv trace") from None


def _read_trace(path: Path, *, need_arrival: bool) -> list[Request]:
    rows: list[tuple[dict, str]] = []
    if path.suffix == ".jsonl":
        for line_no, line in enumerate(jsonl_lines(path.read_text(encoding="utf-8")), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4,300 digits
                why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(";")[0]
                raise TraceError(
                    f"{path}:{line_no}: not valid JSON ({why}); expected one object per line"
                ) from None
            if not isinstance(row, dict):
                raise TraceError(f"{path}:{line_no}: {row!r}; expected a JSON object per line")
            rows.append((row, f"{path}:{line_no}"))
    elif path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            rows = [(row, f"{path}:{n}") for n, row in enumerate(csv.DictReader(f), start=2)]
    else:
        raise TraceError(f"trace file {str(path)!r}: suffix {path.suffix!r}; expected .jsonl or .csv")
    if not rows:
        raise TraceError(f"trace file {str(path)!r} has no rows")
    requests = [_row_to_request(row, i, where, need_arrival=need_arrival) for i, (row, where) in enumerate(rows)]
    first_at: dict[str, str] = {}
    for request, (_, where) in zip(requests, rows, strict=True):
        # predictions, records and the loadgen's results are keyed by id: a second row with one would take the
        # first's prediction, or its record's place, without a word
        if (seen := first_at.setdefault(request.request_id, where)) != where:
            raise TraceError(f"{where}: request_id {request.request_id!r} is also the id at {seen} (a row without "
                             "one is given its row number); each request needs its own")
    return sorted(requests, key=lambda r: r.arrival_s)
