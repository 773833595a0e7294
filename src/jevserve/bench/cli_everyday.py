"""`jevserve bench export-everyday`: write the gateway's everyday calibration file from the train side."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def _per_shape(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: expected a positive integer")
    return int(value)


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
    export.add_argument("--per-shape", type=_per_shape, default=PER_SHAPE,
                        help="train requests per shape (default: %(default)s)")
    export.add_argument("--sample", type=Path, default=None, metavar="FILE",
                        help="also write the test-side sample read by hand (ids, shapes, texts) as JSON lines")
    export.add_argument("--data-cache", default=None, metavar="DIR", help="data cache of `jevserve data fetch`")
    export.set_defaults(func=export_everyday_command)


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
