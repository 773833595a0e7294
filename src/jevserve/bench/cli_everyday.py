"""`jevserve bench export-everyday` (the gateway's everyday calibration file from the train side), `jevserve bench
export-tool-calls` (its ordinary tool calls, for the tool gate) and `jevserve bench validate` (check a submitted
results file)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from jevserve.argtypes import positive_int


def add_export_everyday(commands: argparse._SubParsersAction) -> None:
    """Add the `export-everyday` sub-command."""
    from jevserve.bench.everyday_export import CALIBRATION_PATH, PER_SHAPE

    export = commands.add_parser(
        "export-everyday",
        help="write the packaged everyday-traffic calibration file (train side only)",
        description="Build the everyday source (ordinary ShareGPT user turns in the shapes a gateway sends, screened "
        "against every injection, jailbreak and harmful source) and write up to --per-shape train-side requests of "
        "each shape as gzip-compressed JSON lines (at most 1 MB). The test side is never written.",
    )
    export.add_argument("--out", type=Path, default=CALIBRATION_PATH, metavar="FILE",
                        help="where to write (default: the gateway's packaged file)")
    export.add_argument("--per-shape", type=positive_int("--per-shape"), default=PER_SHAPE,
                        help="train requests per shape (default: %(default)s)")
    export.add_argument("--sample", type=Path, default=None, metavar="FILE",
                        help="also write the test-side sample read by hand (ids, shapes, texts) as JSON lines")
    export.add_argument("--data-cache", default=None, metavar="DIR", help="data cache of `jevserve data fetch`")
    export.set_defaults(func=export_everyday_command)


def add_export_tool_calls(commands: argparse._SubParsersAction) -> None:
    """Add the `export-tool-calls` sub-command."""
    from jevserve.bench.tool_call_export import TOOL_CALL_CALIBRATION_PATH

    export = commands.add_parser(
        "export-tool-calls",
        help="write the packaged ordinary tool calls the tool gate's operating point is computed on (train side only)",
        description="Write BFCL's train-side requests with the calls that answer them (bfcl-eval's possible answers, "
        "each parameter's first acceptable value), less the cases agent-tool-fit trains on, and the scoped calls of "
        "the composed tool-call templates held out for calibration (shape `scoped`), as gateway calibration "
        "requests with `tool_calls` (gzip-compressed JSON lines, at most 1 MB). The test side is never written.",
    )
    export.add_argument("--out", type=Path, default=TOOL_CALL_CALIBRATION_PATH, metavar="FILE",
                        help="where to write (default: the gateway's packaged file)")
    export.add_argument("--data-cache", default=None, metavar="DIR", help="data cache of `jevserve data fetch`")
    export.set_defaults(func=export_tool_calls_command)


def export_tool_calls_command(args: argparse.Namespace) -> int:
    """`jevserve bench export-tool-calls`."""
    from jevserve.bench.data import BenchData
    from jevserve.bench.sources import SourceMissingError
    from jevserve.bench.tool_call_export import calibration_records_from, write_tool_calls

    try:
        # the composed templates' scoped calls, handed in by the command line (the bench may not import train/)
        records = calibration_records_from(BenchData(args.data_cache), args.scoped_calibration_records())
    except SourceMissingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        size = write_tool_calls(args.out, records)
    except (ValueError, OSError) as exc:
        print(f"error: --out {args.out}: {exc}", file=sys.stderr)
        return 1
    shapes = Counter(r["shape"] for r in records)
    calls = sum(len(r["tool_calls"]) for r in records)
    print(f"wrote {args.out}: {len(records):,} train requests with {calls:,} calls "
          f"({', '.join(f'{k} {v}' for k, v in sorted(shapes.items()))}), {size:,} bytes")
    return 0


def export_everyday_command(args: argparse.Namespace) -> int:
    """`jevserve bench export-everyday`."""
    from jevserve.bench.everyday_export import (
        HANDCHECK_PATH,
        calibration_records,
        contamination,
        handcheck_sample,
        read_handcheck,
        write_calibration,
    )
    from jevserve.bench.sources import SourceMissingError
    from jevserve.bench.sources.everyday import everyday_set, user_texts

    try:
        everyday = everyday_set(args.data_cache)
    except SourceMissingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"everyday: {everyday.num_candidates:,} conversations, {everyday.num_screened:,} screened out, "
          f"train {len(everyday.train):,} (dropped {everyday.num_train_dropped:,} sharing a test text), "
          f"test {len(everyday.test):,} (dropped {everyday.num_test_dropped:,} near training texts)", file=sys.stderr)
    records = calibration_records(everyday.train, args.per_shape)
    try:
        size = write_calibration(args.out, records)
    except (ValueError, OSError) as exc:
        print(f"error: --out {args.out}: {exc}", file=sys.stderr)
        return 1
    shapes = Counter(r["shape"] for r in records)
    print(f"wrote {args.out}: {len(records):,} train requests ({', '.join(f'{k} {v}' for k, v in shapes.items())}), "
          f"{size:,} bytes")
    if HANDCHECK_PATH.exists():
        rate = contamination(read_handcheck(HANDCHECK_PATH))
        print(f"hand check ({HANDCHECK_PATH}): {rate.num_contaminated} of {rate.num_checked} test requests "
              f"contaminated, {100 * rate.rate:.1f}% [{100 * rate.low:.2f}%, {100 * rate.high:.1f}%]")
    if args.sample is not None:
        with args.sample.open("w", encoding="utf-8") as handle:
            for request in handcheck_sample(everyday.test):
                row = {"id": request.request_id, "shape": request.shape, "user_texts": user_texts(request.body)}
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        print(f"wrote the hand-check sample to {args.sample}", file=sys.stderr)
    return 0


def add_validate(commands: argparse._SubParsersAction) -> None:
    """Add the `validate` sub-command."""
    validate = commands.add_parser(
        "validate",
        help="check a results file submitted for the board (items, hashes, version, scores)",
        description="Check that a results file (as `jevserve bench run` writes it) was scored on the current bench: "
        "its version, its tasks' test items, labels, default and oracle actions and their digest, one prediction "
        "per item, and scores that follow from its predictions. Exit status 0 when it can go on the board.",
    )
    validate.add_argument("files", type=Path, nargs="+", metavar="FILE", help="results files to check")
    validate.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                          help="the results folder holding the current default-rules row (default: %(default)s)")
    validate.set_defaults(func=validate_command)


def validate_command(args: argparse.Namespace) -> int:
    """`jevserve bench validate`."""
    from jevserve.bench.pipeline import BENCH_VERSION
    from jevserve.bench.results import ResultsFormatError, latest_results, read_result
    from jevserve.bench.validate import headline_tasks, validate_document

    folders = [str(path) for path in args.files if path.is_dir()]
    if folders:
        print(f"error: {', '.join(folders)}: a folder; name the results files in it (e.g. "
              f"{Path(folders[0]) / '*.json'})", file=sys.stderr)
        return 2
    missing = [str(path) for path in args.files if not path.is_file()]
    if missing:
        print(f"error: no such results file: {', '.join(missing)}", file=sys.stderr)
        return 2
    reference = next((d for d in latest_results(args.results).documents if d["model"] == "default-rules"), None) \
        if args.results.is_dir() else None
    if reference is None:
        print(f"error: no default-rules row under {args.results}; run `jevserve bench run --baselines` or pass "
              "--results DIR", file=sys.stderr)
        return 2
    failed = 0
    headline = headline_tasks(reference)
    for path in args.files:
        document = None
        try:
            document = read_result(path)
            problems = validate_document(document, reference, BENCH_VERSION)
        except (OSError, ResultsFormatError) as exc:
            problems = [str(exc)]
        failed += bool(problems)
        print(f"{path}: " + ("valid" if not problems else f"{len(problems)} problem(s)"))
        for problem in problems:
            print(f"  - {problem}")
        missing = sorted(headline - set(document.get("tasks") or ())) if document is not None else []
        if not problems and missing:  # valid, and on the board, but a headline over some tasks is no headline
            print(f"  note: it scores {len(headline) - len(missing)} of the {len(headline)} headline tasks, so the "
                  f"board shows it unranked (missing: {', '.join(missing)})")
    return 1 if failed else 0
