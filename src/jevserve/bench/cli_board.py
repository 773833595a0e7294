"""`jevserve bench board`: the leaderboard page, plots, snapshot and markdown from the results files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

DEFAULT_RESULTS = Path("results")
DEFAULT_BOARD = Path("docs/board")


def add_board(commands: argparse._SubParsersAction) -> None:
    """Add the `board` sub-command."""
    board = commands.add_parser(
        "board",
        help="write the leaderboard (static HTML page and markdown table) from results files",
        description="Read every row's results under --results (its newest file among those that score the most "
        "tasks: a quick run of a few tasks does not replace a complete one) and write a self-contained, "
        "sortable HTML page (DIR/index.html) and a markdown table; ranks come from paired bootstrap resamples.",
    )
    board.add_argument("--results", type=Path, default=DEFAULT_RESULTS, metavar="DIR",
                       help="results folder (default: %(default)s)")
    board.add_argument("--out", type=Path, default=DEFAULT_BOARD, metavar="DIR",
                       help="folder of the HTML page (default: %(default)s)")
    board.add_argument("--markdown", type=Path, default=None, metavar="FILE",
                       help="markdown table (default: docs/board.md with the default --out; with another --out, "
                       "board.md inside it, so that a board written elsewhere leaves the committed table alone)")
    board.add_argument("--into", type=Path, default=None, metavar="FILE",
                       help="also replace the generated 'glance' and 'tasks' blocks of this file (docs/bench.md)")
    board.add_argument("--package", action="store_true",
                       help="also copy the board snapshot into the package (jevserve/web/data/board.json), the board "
                       "`jevserve web` serves outside a checkout")
    board.set_defaults(func=board_command)


def board_command(args: argparse.Namespace) -> int:
    """`jevserve bench board`."""
    from jevserve.bench.board_html import write_board

    if not args.results.is_dir():
        print(f"error: results folder {str(args.results)!r} does not exist; run `jevserve bench run` first, or "
              "pass --results DIR where the results are (a checkout's results/)", file=sys.stderr)
        return 1
    markdown = args.markdown or (DEFAULT_BOARD.parent if args.out == DEFAULT_BOARD else args.out) / "board.md"
    if args.into is not None and (problem := _into_problem(args.into)):  # said before the minute of work, not after
        print(f"error: --into {args.into}: {problem}", file=sys.stderr)
        return 1
    warnings: list[str] = []
    try:
        written = write_board(args.results, args.out, markdown, warnings_out=warnings)
    except FileNotFoundError as exc:
        if exc.filename is not None:  # a path the writing needed: the command line's handler names it
            raise
        print(f"error: {exc}", file=sys.stderr)  # no result file, or none readable: the message says which
        return 1
    for path in written:
        print(f"wrote {path}")
    for warning in warnings:  # files left out, rows not ranked: the pages say so at their foot, and so does this
        print(f"note: {warning}", file=sys.stderr)
    if args.package:
        import shutil

        import jevserve

        packaged = Path(jevserve.__file__).parent / "web" / "data" / "board.json"
        packaged.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.out / "board.json", packaged)
        print(f"wrote {packaged}")
    if args.into is not None:
        return _into(args.into, args.out / "board.json")
    return 0


def _into_problem(path: Path) -> str | None:
    """Why the board's tables cannot go into `path` (unreadable, or without the blocks they replace), else None."""
    from jevserve.bench import board_markdown as md
    from jevserve.docsections import replace_block

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return str(exc) if isinstance(exc, OSError) else f"not UTF-8 text ({exc})"
    for begin, end in ((md.GLANCE_BEGIN, md.GLANCE_END), (md.TASKS_BEGIN, md.TASKS_END)):
        if replace_block(text, begin, end, "") is None:  # the rule the writing uses: both, the end after the begin
            return f"no block between {begin!r} and {end!r}"
    return None


def _into(path: Path, snapshot: Path) -> int:
    from jevserve.bench import board_markdown as md
    from jevserve.bench.board_snapshot import read_snapshot
    from jevserve.docsections import replace_block

    board = read_snapshot(snapshot)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: --into {path}: {exc}", file=sys.stderr)
        return 1
    for begin, end, block in ((md.GLANCE_BEGIN, md.GLANCE_END, md.glance_markdown(board)),
                              (md.TASKS_BEGIN, md.TASKS_END, md.tasks_table_markdown(board))):
        replaced = replace_block(text, begin, end, f"{begin}\n{block}{end}")
        if replaced is None:
            print(f"error: --into {path}: no block between {begin!r} and {end!r}", file=sys.stderr)
            return 1
        text = replaced
    path.write_text(text, encoding="utf-8")
    print(f"wrote the glance and tasks tables into {path}")
    return 0


