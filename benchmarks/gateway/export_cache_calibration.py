"""Write the cache's packaged calibration pairs (jevserve/gateway/data/cache-calibration.jsonl.gz).

    .venv/bin/python benchmarks/gateway/export_cache_calibration.py [--check]

The pairs are the first six blind-written sets of benchmarks/decide/ (cache_pairs_blind.jsonl, _blind2 … _blind6:
written by helpers shown none of the project's files, never fitted on), each as a calibration record: the cached
request and the new one as chat bodies, the pair's kind as its shape, and `"labels": {"cache": true}` where one answer
serves both (those are not negatives: serving them is not a false action). The seventh set stays out, so that what a
rate-set cache threshold serves can be read on pairs it was not set on (benchmarks/decide/cache_rate_point.py
`--calibration packaged --held-out blind7`), as do the gateway's own hand-written pairs and the bench's cache-pairs
test side (benchmarks/gateway/everyday.py). The gzip is written without a timestamp, so the same pairs give the same
bytes (the file's digest keys the cached calibration scores). `--check` compares instead of writing.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETS = [ROOT / "benchmarks" / "decide" / f"cache_pairs_blind{n}.jsonl" for n in ("", 2, 3, 4, 5, 6)]
TARGET = ROOT / "src" / "jevserve" / "gateway" / "data" / "cache-calibration.jsonl.gz"


def body(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def records() -> list[dict]:
    out = []
    for path in SETS:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            pair = json.loads(line)
            out.append({
                "id": f"{path.stem.removeprefix('cache_pairs_')}-{number}",
                "shape": pair["kind"],
                "cached": body(pair["cached"]),
                "body": body(pair["new"]),
                "labels": {"cache": bool(pair["same_answer"])},
            })  # fmt: skip
    return out


def held_out(rows: list[dict]) -> tuple[list[dict], int]:
    """The pairs of another set (`{"cached", "new", ...}`) less those whose two texts both occur among the packaged
    pairs' texts (the blind sets' writers sometimes wrote the same pair); and how many were dropped."""
    seen = {m["content"] for r in records() for m in (*r["cached"]["messages"], *r["body"]["messages"])}
    kept = [r for r in rows if not (r["cached"] in seen and r["new"] in seen)]
    return kept, len(rows) - len(kept)


def packed(rows: list[dict]) -> bytes:
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n" for row in rows)
    return gzip.compress(text.encode("utf-8"), mtime=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the packaged file differs from the sets")
    args = parser.parse_args()
    rows = records()
    data = packed(rows)
    if args.check:
        same = TARGET.is_file() and TARGET.read_bytes() == data
        print(f"{TARGET.name}: {'matches' if same else 'differs from'} the blind sets ({len(rows)} pairs)")
        sys.exit(0 if same else 1)
    TARGET.write_bytes(data)
    differ = sum(not row["labels"]["cache"] for row in rows)
    print(f"wrote {TARGET} ({len(rows)} pairs, {differ} whose answers differ; {len(data):,} bytes)")


if __name__ == "__main__":
    main()
