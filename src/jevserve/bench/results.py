"""Results files: one JSON document per row of the board, `results/<model>/<YYYY-MM-DD>.json`.

A file holds the row's name, date, the command that reproduces it, wall time and decision counts, and per task the
metric values (model, default, oracle, source-only), the normalised score with its interval, calibration,
automation share, and the per-item test arrays from which the board recomputes paired resamples.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jevserve.bench.answers_cache import safe_name
from jevserve.protocol.json_keys import first_repeated_key

KIND = "jevserve-bench-result"
VERSION = 1


class ResultsFormatError(ValueError):
    """A results file that is not a bench result of a version this code reads."""


def _jsonable(value: Any) -> Any:
    # JSON has no infinities or NaN: ±inf thresholds become "inf"/"-inf", an undefined number becomes null.
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


def result_path(results_dir: Path, model: str, date: str) -> Path:
    """Where a row's results for one day go."""
    return Path(results_dir) / safe_name(model) / f"{date}.json"


def write_result(results_dir: Path, document: dict[str, Any]) -> Path:
    """Write a result document and return its path: it replaces that row's file of the same date unless that file
    scores tasks this one does not (a run of fewer tasks the same day), which is kept; the new one then goes beside
    it, named after its tasks (`DATE.TASKS-DIGEST.json`)."""
    path = result_path(results_dir, document["model"], document["date"])
    if path.exists():
        try:
            kept = set(read_result(path).get("tasks") or ())
        except ResultsFormatError:
            kept = set()  # unreadable: replaced
        if kept - set(document.get("tasks") or ()):
            digest = hashlib.sha256(",".join(sorted(document.get("tasks") or ())).encode()).hexdigest()[:8]
            path = path.with_name(f"{document['date']}.{digest}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_jsonable({"kind": KIND, "version": VERSION, **document}), ensure_ascii=False, allow_nan=False)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)  # never leave a half-written result where the board would read it
    return path


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _one_of_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    repeated = first_repeated_key(pairs)
    if repeated is not None:
        raise _RepeatedKey(repeated)
    return dict(pairs)


def read_result(path: Path) -> dict[str, Any]:
    """Read one result document, checking its kind and version."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"), object_pairs_hook=_one_of_each)
    except _RepeatedKey as exc:
        # JSON keeps the last of a repeated key: a task twice, its altered copy first, passed as the other
        raise ResultsFormatError(f"{path} has the key {exc.key!r} twice in one object; only one would be "
                                 "read") from None
    except UnicodeDecodeError as exc:
        raise ResultsFormatError(f"{path} is not UTF-8 text ({exc})") from exc
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's 4,300 digits
        raise ResultsFormatError(f"{path} is not valid JSON ({str(exc).split(';')[0]})") from exc
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise ResultsFormatError(f"{path} is not a bench result (its 'kind' is not {KIND!r})")
    if document.get("version") != VERSION:
        raise ResultsFormatError(f"{path} has version {document.get('version')!r}; this jevserve reads {VERSION}")
    tasks = document.get("tasks")
    if not isinstance(document.get("model"), str) or not isinstance(tasks, dict) or not all(
            isinstance(result, dict) for result in tasks.values()):
        # every reader indexes these; one file without them took down every page of the board, not only its row
        raise ResultsFormatError(f"{path} is a bench result without its 'model' name or its 'tasks' (an object of "
                                 "per-task results): not written by `jevserve bench run`, or cut short")
    metadata = document.get("metadata")
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        # the board reads it as an object of strings: a list there took every page of the board down
        raise ResultsFormatError(f"{path}: 'metadata' is {type(metadata).__name__}, not an object of strings "
                                 "(`bench run --metadata KEY=VALUE` writes one)")
    return document


@dataclass(frozen=True)
class LatestResults:
    """The newest result of every row under a results folder, and the files that were not bench results."""

    documents: tuple[dict[str, Any], ...]  # one per model folder, newest date first within the folder
    ignored: tuple[str, ...]  # paths skipped, with the reason


def row_results(results_dir: Path, ignored: list[str]) -> Iterator[list[tuple[Path, dict[str, Any]]]]:
    """Every row folder's readable results, newest first (later days first; within a day, the later written). Files
    that are not bench results, or that are another row's result, are named in `ignored` with the reason; folders
    without bench results (e.g. other caches) yield nothing. The one walk every reader of a results folder uses, so
    the board, `bench validate` and the training report never read different files."""
    for folder in sorted(p for p in Path(results_dir).iterdir() if p.is_dir()):
        readable: list[tuple[Path, dict[str, Any]]] = []
        for path in sorted(folder.glob("????-??-??*.json"), key=_newest_first, reverse=True):
            try:
                document = read_result(path)
            except ResultsFormatError as exc:
                ignored.append(str(exc))
                continue
            if safe_name(document["model"]) != folder.name:  # a row's folder holds that row's results only
                ignored.append(f"{path} is a result of {document['model']!r}, not of the row its folder is "
                               f"({folder.name}); it belongs in {safe_name(document['model'])}/")
                continue
            readable.append((path, document))
        if readable:
            yield readable


def latest_results(results_dir: Path) -> LatestResults:
    """Each model folder's newest result among those that score the most tasks: a quick run of a few tasks does not
    replace a row's complete one (it is named in `ignored`). Folders without bench results (e.g. other caches) are
    left out."""
    documents: list[dict[str, Any]] = []
    ignored: list[str] = []
    for readable in row_results(results_dir, ignored):
        most = max(len(document.get("tasks") or ()) for _, document in readable)
        chosen_path, chosen = next((p, d) for p, d in readable if len(d.get("tasks") or ()) == most)
        documents.append(chosen)
        newer = True
        for path, document in readable:
            if path == chosen_path:
                newer = False
                continue
            own = sorted(set(document.get("tasks") or ()) - set(chosen.get("tasks") or ()))
            if newer:
                ignored.append(f"{path} scores {len(document.get('tasks') or ())} of the {most} tasks of "
                               f"{chosen_path} and is left out although newer (a row is read from its broadest run)")
            elif own:  # an older run is history, unless it holds tasks the row's run does not
                ignored.append(f"{path} scores tasks the row's run ({chosen_path}) does not ({', '.join(own)}) and "
                               "is left out (a row is read from one run: run those tasks together with the others)")
    return LatestResults(tuple(documents), tuple(ignored))


def _newest_first(path: Path) -> tuple[str, float]:
    # later days first; within a day (`DATE.json` and the quick runs' `DATE.DIGEST.json`), the later written
    date = path.name[:10]
    return (date, path.stat().st_mtime)


# A row whose endpoint left more of its items unanswered than this is not the model's score but the endpoint's
# refusals (each read as "no information"): `bench validate` keeps it off the board.
MAX_UNANSWERED_SHARE = 0.05


def unanswered_share(document: dict[str, Any]) -> float:
    """The share of a row's items its endpoint refused (0 where the file does not say how many it had)."""
    missing, items = document.get("num_unanswered") or 0, document.get("num_items")
    return missing / items if isinstance(items, int) and items > 0 else 0.0


def unanswered_note(document: dict[str, Any]) -> str | None:
    """What a row's refused requests mean for its scores, or None when every item was answered."""
    missing, items = document.get("num_unanswered") or 0, document.get("num_items")
    if not missing:
        return None
    share = f" ({100 * missing / items:.1f}%)" if items else ""
    of = f" of {items:,}" if items else ""
    return (f"{missing:,}{of} items unanswered{share}: the endpoint refused them (400, 413 or 422) and each is "
            "scored as no information")
