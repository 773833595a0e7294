"""The README's results table against the committed results it cites.

Each row of the table under the README's "Results" heading ends with a comment naming where its figures come from:

    | guard, everyday requests refused | 0.2 % (4 of 1,708) | `python …` | [gateway](docs/gateway.md) <!-- from
    benchmarks/results/gateway_everyday.json: /everyday/all/rate*100, /everyday/all/count, /everyday/all/n --> |

The JSON pointers (RFC 6901, optionally `*FACTOR`) are read in order against the numbers of the row's second cell;
each number must equal its value rounded to the decimals it is shown with. A row that shows a number with no
source, or cites a file or key that is not there, fails.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_ROWS = 8
SOURCE = re.compile(r"<!--\s*from\s+(\S+?):\s*(.*?)\s*-->", re.S)
NUMBER = re.compile(r"[-−]?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Row:
    """One row of the results table: its cells (the source comment removed) and where its figures come from."""

    line: int
    cells: tuple[str, ...]
    source_file: str | None
    pointers: tuple[str, ...]

    @property
    def figures(self) -> list[str]:
        """The numbers the result cell shows, in order."""
        return NUMBER.findall(self.cells[1]) if len(self.cells) > 1 else []


def results_rows(markdown: str, heading: str = "Results") -> list[Row]:
    """The rows of the first table after the heading that contains `heading` (header and rule left out)."""
    lines = markdown.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("#") and heading in line), None)
    if start is None:
        return []
    rows: list[Row] = []
    in_table = False
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if in_table:
                break
            continue
        if not in_table:  # the header row, then its |---| rule
            in_table = True
            continue
        if set(line) <= set("|-: "):
            continue
        found = SOURCE.search(line)
        cells = tuple(c.strip() for c in SOURCE.sub("", line).strip().strip("|").split("|"))
        pointers = tuple(p.strip() for p in found.group(2).split(",")) if found else ()
        rows.append(Row(number, cells, found.group(1) if found else None, pointers))
    return rows


def resolve(document: Any, pointer: str) -> Any:
    """The value at a JSON pointer (`/a/0/b`; `~1` is `/`, `~0` is `~`)."""
    value = document
    for part in pointer.lstrip("/").split("/") if pointer.strip("/") else []:
        key = part.replace("~1", "/").replace("~0", "~")
        value = value[int(key)] if isinstance(value, list) else value[key]
    return value


def _shown(figure: str) -> tuple[float, int]:
    """A figure as shown (`1,708`, `−37.1`) → its value and its number of decimals."""
    text = figure.replace(",", "").replace("−", "-")
    return float(text), len(text.partition(".")[2])


def check_row(row: Row, root: Path) -> list[str]:
    """What is wrong with a row: a figure with no source, a missing file or key, a figure its source does not give."""
    where = f"README.md:{row.line}"
    if row.source_file is None:
        return [f"{where}: the row names no source (<!-- from FILE: /pointer, ... -->)"]
    path = root / row.source_file
    if not path.is_file():
        return [f"{where}: {row.source_file} does not exist"]
    if len(row.pointers) != len(row.figures):
        return [f"{where}: shows {len(row.figures)} numbers {row.figures} but names {len(row.pointers)} sources"]
    document = json.loads(path.read_text())
    problems = []
    for figure, pointer in zip(row.figures, row.pointers, strict=True):
        key, _, factor = pointer.partition("*")
        try:
            value = float(resolve(document, key)) * float(factor or 1)
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            problems.append(f"{where}: {row.source_file} has no number at {key} ({exc!r})")
            continue
        shown, decimals = _shown(figure)
        if round(value, decimals) != shown:
            problems.append(f"{where}: shows {figure}, but {row.source_file} {pointer} is {value:.{decimals + 2}f}")
    return problems
