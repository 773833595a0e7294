"""`jevserve bench spread`: the no-endpoint rows refitted and rescored under several split salts (bench.spread)."""

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
    from jevserve.sim.docsections import replace_block

    report = spread(list(TASKS.values()), BenchData(args.data_cache), salts(args.salts),
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
