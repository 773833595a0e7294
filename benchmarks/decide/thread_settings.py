"""onnxruntime thread settings of the embedded encoder, quiet and with one competing busy process.

For each setting (intra-op threads 1 or 2; spinning off, within a forward pass only (`run`), or on) the bare int8
forward pass of one ~140-token state (cache off) is timed, first on the machine as it is, then while this script runs
one extra process that spins a core (`python -c "while True: pass"`). Settings and loads are
interleaved over rounds; medians are reported.

Writes benchmarks/results/thread_settings.json and a section of docs/server.md.
Run: nice -n 10 .venv/bin/python benchmarks/decide/thread_settings.py [--forwards 150] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import busy_process, machine, pct_ms, replace_section, uptime, write_result
from jevserve.decide.embedder import Embedder

SETTINGS = [(1, "off"), (2, "off"), (2, "run"), (2, "on")]  # (intra-op threads, spinning); one thread never spins


def state_text(i: int) -> str:
    words = ["refund", "invoice", "latency", "server", "crash", "billing", "shipping", "urgent", "database", "token"]
    return " ".join(f"{words[(i * 7 + k) % len(words)]}{k % 13}" for k in range(60))  # ~100 word pieces


def time_forwards(embedder: Embedder, forwards: int, offset: int) -> list[float]:
    out = []
    for i in range(forwards):
        started = time.perf_counter()
        embedder.embed([state_text(offset + i)])
        out.append(time.perf_counter() - started)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--forwards", type=int, default=150, help="timed forwards per setting, load and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    result = {"machine": machine(), "command": " ".join(["python benchmarks/decide/thread_settings.py", *sys.argv[1:]])}
    embedders = {(t, s): Embedder("int8", num_threads=t, spinning=s, cache_size=0) for t, s in SETTINGS}
    tokens = embedders[(1, "off")].num_tokens(state_text(0))
    samples: dict[str, list[float]] = {}
    for r in range(args.rounds):
        for busy in (False, True):
            with busy_process(busy):
                for (threads, spin), embedder in embedders.items():
                    embedder.embed([state_text(10_000 + r)])  # warm
                    key = f"threads={threads} spinning={spin} load={'busy' if busy else 'quiet'}"
                    samples.setdefault(key, []).extend(time_forwards(embedder, args.forwards, r * 100_000))
        print(f"round {r + 1} of {args.rounds} done; {uptime()}", file=sys.stderr)
    result["state_tokens"] = tokens
    result["forward"] = {key: pct_ms(times) for key, times in samples.items()}
    result["uptime_after"] = uptime()
    write_result("thread_settings", result)
    rows = []
    for threads, spin in SETTINGS:
        name = f"threads={threads} spinning={spin}"
        quiet, busy = result["forward"][f"{name} load=quiet"], result["forward"][f"{name} load=busy"]
        rows.append(
            f"| {threads} | {spin} | {quiet['p50_ms']:.2f} | {quiet['p99_ms']:.2f} | "
            f"{busy['p50_ms']:.2f} | {busy['p99_ms']:.2f} | {busy['p50_ms'] / quiet['p50_ms']:.2f} |"
        )
    replace_section(
        "thread_settings",
        f"""## Encoder thread settings under a competing load

Bare int8 forward of one {tokens}-token state (cache off), per onnxruntime setting, on the machine as it is
("quiet") and with one extra process spinning a core ("busy", started by the script). Median over
{args.rounds} interleaved rounds of {args.forwards} forwards. Measured {result["machine"]["when"]},
{result["machine"]["cpus"]} CPUs; `uptime` before: `{result["machine"]["uptime_before"]}`; after:
`{result["uptime_after"]}` (the machine is shared with other jobs: the "quiet" load is not zero).
Command: `{result["command"]}` (results: `benchmarks/results/thread_settings.json`).

| intra-op threads | spinning | quiet p50 ms | quiet p99 ms | busy p50 ms | busy p99 ms | busy / quiet p50 |
|---|---|---|---|---|---|---|
{chr(10).join(rows)}
""",
    )
    print(result["forward"])


if __name__ == "__main__":
    main()
