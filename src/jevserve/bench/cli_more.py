"""`jevserve bench spread` (split variance, bench.spread) and `jevserve bench rebase` (bench.rebase)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _salt_count(value: str) -> int:
    if not value.isdigit() or int(value) < 2:
        raise argparse.ArgumentTypeError(f"{value!r}: expected an integer >= 2 (the bench's salt and more)")
    return int(value)


def add_spread(commands: argparse._SubParsersAction) -> None:
    """Add the `spread` sub-command."""
    spread = commands.add_parser(
        "spread",
        help="rescore the default rules and tfidf-lr under several split salts (split variance)",
        description="Re-split every task under N salts (the bench's and N-1 more), refit the default rules and "
        "tfidf-lr on each train side and score each test side; write RESULTS/split-spread.json and a markdown table "
        "(into the generated block of --into).",
    )
    spread.add_argument("--salts", type=_salt_count, default=5, help="number of salts (default: %(default)s)")
    spread.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                        help="results folder (default: %(default)s)")
    spread.add_argument("--into", type=Path, default=None, metavar="FILE",
                        help="replace the generated spread block of this markdown file (e.g. docs/bench.md)")
    spread.add_argument("--data-cache", default=None, metavar="DIR", help="data cache of `jevserve data fetch`")
    spread.set_defaults(func=spread_command)


def spread_command(args: argparse.Namespace) -> int:
    """`jevserve bench spread`."""
    from jevserve.bench.data import BenchData
    from jevserve.bench.spread import BEGIN_MARK, END_MARK, salts, spread, spread_markdown, write_spread
    from jevserve.bench.tasks import TASKS
    from jevserve.docsections import replace_block

    report = spread(list(TASKS.values()), BenchData(args.data_cache, embed=args.embed_texts), salts(args.salts),
                    log=lambda m: print(m, file=sys.stderr))
    path = write_spread(report, args.results / "split-spread.json")
    text = spread_markdown(report)
    print(text)
    print(f"wrote {path}", file=sys.stderr)
    if args.into is not None:
        try:
            document = args.into.read_text(encoding="utf-8")
        except OSError as exc:
            print(f"error: --into {args.into}: {exc}", file=sys.stderr)
            return 1
        replaced = replace_block(document, BEGIN_MARK, END_MARK, f"{BEGIN_MARK}\n{text}{END_MARK}")
        if replaced is None:
            print(f"error: --into {args.into}: no block between {BEGIN_MARK!r} and {END_MARK!r}", file=sys.stderr)
            return 1
        args.into.write_text(replaced, encoding="utf-8")
        print(f"wrote the spread table into {args.into}", file=sys.stderr)
    return 0


def add_rebase(commands: argparse._SubParsersAction) -> None:
    """Add the `rebase` sub-command."""
    rebase = commands.add_parser(
        "rebase",
        help="carry a model row of an older bench version onto the current test items and zero-points",
        description="Rescore a model row's stored test actions against the newest default-rules row (its test items "
        "must be a subset of the row's), without asking the model again; writes RESULTS/ROW/DATE.json marked as "
        "rebased. For rows that cannot be rerun in time (e.g. the leave-one-task-out heads).",
    )
    rebase.add_argument("row", help="the results folder name of the row, e.g. jev-minilm-1-heldout")
    rebase.add_argument("--source", type=Path, required=True, metavar="FILE", help="the older results file")
    rebase.add_argument("--fresh", type=Path, default=None, metavar="FILE",
                        help="a current run of the same model over some tasks (`bench run --tasks ...`): those tasks "
                        "are taken from it (e.g. schedule-return, whose AUROC needs probabilities the old file lacks)")
    rebase.add_argument("--results", type=Path, default=Path("results"), metavar="DIR",
                        help="results folder (default: %(default)s)")
    rebase.set_defaults(func=rebase_command)


def rebase_command(args: argparse.Namespace) -> int:
    """`jevserve bench rebase`."""
    from jevserve.bench.rebase import rebase_document
    from jevserve.bench.results import ResultsFormatError, latest_results, read_result, write_result

    try:
        old = read_result(args.source)
    except (OSError, ResultsFormatError) as exc:
        print(f"error: --source {args.source}: {exc}", file=sys.stderr)
        return 2
    if old.get("model") != args.row:
        print(f"error: --source {args.source} is a result of {old.get('model')!r}, not {args.row!r}", file=sys.stderr)
        return 2
    reference = next((d for d in latest_results(args.results).documents if d["model"] == "default-rules"), None)
    if reference is None:
        print(f"error: no default-rules row under {args.results}; run `jevserve bench run --baselines`",
              file=sys.stderr)
        return 1
    try:
        fresh = read_result(args.fresh) if args.fresh else None
        if fresh is not None and fresh.get("model") != args.row:
            raise ValueError(f"--fresh {args.fresh} is a result of {fresh.get('model')!r}, not {args.row!r}")
        document = rebase_document(old, reference, note=f"{args.source} (bench {old.get('bench_version', '0.2')})",
                                   fresh=fresh)
    except (OSError, ResultsFormatError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    document["command"] = f"jevserve bench rebase {args.row} --source {args.source}" + (
        f" --fresh {args.fresh}" if args.fresh else "")
    path = write_result(args.results, document)
    average = document["average"]
    print(f"{args.row}: average {average['score']:.1f} [{average['interval'][0]:.1f}, {average['interval'][1]:.1f}]"
          f" (rebased from {args.source}) -> {path}")
    return 0
