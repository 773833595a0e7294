"""Readers for the file formats packages ship data in, with errors that name the file and the row at fault."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jevserve.bench.sources.errors import SourceFormatError, SourceMissingError


def read_json(path: Path) -> Any:
    """The parsed content of a JSON file."""
    try:
        with path.open(encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as exc:
        raise SourceFormatError(f"{path} is not valid JSON: {exc}") from exc


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line of a JSON-lines file."""
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SourceFormatError(f"{path}:{number} is not valid JSON: {exc}") from exc
            if not isinstance(row, dict):
                raise SourceFormatError(f"{path}:{number} is a {type(row).__name__}; expected a JSON object")
            yield number, row


def read_yaml(path: Path) -> Any:
    """The parsed content of a YAML file (safe loader: no Python objects)."""
    import yaml  # a dependency of transformers; imported here so `import jevserve` stays light

    # The C loader when libyaml is there: PyRIT's 488 templates take 1.5 s with the pure-Python one.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with path.open(encoding="utf-8") as f:
            return yaml.load(f, Loader=loader)  # a safe loader either way: no Python objects
    except yaml.YAMLError as exc:
        raise SourceFormatError(f"{path} is not valid YAML: {exc}") from exc


def read_parquet(path: Path, source: str) -> list[dict[str, Any]]:
    """The rows of a parquet file as dicts; pyarrow is an optional dependency (`jevserve[parquet]`)."""
    try:
        import pyarrow.parquet as pq  # imported here: only one source ships parquet
    except ImportError:
        raise SourceMissingError.needs_module(source, "pyarrow", "jevserve[parquet]") from None

    try:
        return pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise SourceFormatError(f"{path} is not a readable parquet file: {exc}") from exc


def field_of(row: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """row[key], checked to exist and to have the expected type; `where` names the file and row in the error."""
    if key not in row:
        raise SourceFormatError(f"{where}: missing field {key!r}; fields present: {', '.join(sorted(row))}")
    value = row[key]
    if not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise SourceFormatError(f"{where}: field {key!r} is {value!r}; expected a {expected}")
    return value


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces, so equal structures give equal strings (and equal ids)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
