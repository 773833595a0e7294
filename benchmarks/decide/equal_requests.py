"""Equal requests sent at once: when each is answered, and how many within an SDK client's 10 s timeout.

An outside tester's scenario: 10 clients each send one request of 200 choice questions of 8 options (every state
and instructions text new to the server; the option texts shared by the clients and the rounds) at the same moment
to a `jevserve serve` with its defaults. Each client's time to its answer is recorded (no timeout on the client:
the time is what a client with a long enough timeout would wait). The batcher fills batches shortest remaining
work first; `--src DIR --label NAME` runs a server from another source tree (e.g. the batcher that served the
least-served request first, under which equal requests queued together take turns) on the same rounds.

Writes benchmarks/results/equal_requests[_LABEL].json and a section of docs/server.md.
Run: .venv/bin/python benchmarks/decide/equal_requests.py [--clients 10] [--questions 200] [--src DIR --label NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import add_source_tree_arguments, machine, publish, serve, source_tree_env

SDK_TIMEOUT_S = 10.0  # typesafe-sdk's default request timeout


def body(client: int, questions: int, round_: int) -> dict:
    options = {f"option {j} of question {{i}}": None for j in range(8)}
    return {
        "model": "jev-latest",
        "state": f"round {round_}, client {client}: the invoice for March was charged twice and the app crashes",
        "questions": {
            f"q{i}": {"type": "choice", "instructions": f"Round {round_}, client {client}: which topic {i}?",
                      "criteria": {k.format(i=i): v for k, v in options.items()}}
            for i in range(questions)
        },
    }


async def burst(url: str, clients: int, questions: int, round_: int) -> list[float]:
    async with httpx.AsyncClient(timeout=600) as http:
        started = time.perf_counter()

        async def one(client: int) -> float:
            response = await http.post(url + "/v1/systemone", json=body(client, questions, round_))
            response.raise_for_status()
            return time.perf_counter() - started

        return sorted(await asyncio.gather(*(one(k) for k in range(clients))))


def markdown(result: dict) -> str:
    label = f" ({result['label']})" if result.get("label") else ""
    lines = [
        f"### Equal requests sent at once{label} (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}. "
        f"`jevserve serve` (defaults); {result['clients']} clients send {result['questions']} choice questions of 8 "
        "options each at once (states and instructions new to the server, option texts shared). Seconds from the "
        "send to each client's answer.",
        "",
        f"| round | first answered | median | last answered | answered within {SDK_TIMEOUT_S:g} s |",
        "|---|---|---|---|---|",
    ]
    for i, times in enumerate(result["rounds"], 1):
        within = sum(t <= SDK_TIMEOUT_S for t in times)
        lines.append(f"| {i} | {times[0]:.1f} | {np.median(times):.1f} | {times[-1]:.1f} | "
                     f"{within} of {len(times)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=10, help="clients sending at once (default 10)")
    parser.add_argument("--questions", type=int, default=200, help="questions per request (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="bursts sent to one fresh server (default 2)")
    add_source_tree_arguments(parser)
    args = parser.parse_args()
    env = source_tree_env(parser, args)
    result = {"machine": machine(), "label": args.label, "clients": args.clients, "questions": args.questions,
              "rounds": []}
    with serve("embedded", env=env) as served:
        for round_ in range(args.rounds):
            url = f"http://127.0.0.1:{served.port}"
            result["rounds"].append(asyncio.run(burst(url, args.clients, args.questions, round_)))
    defaults = (args.clients, args.questions, args.rounds) == (10, 200, 2)
    result["command"] = (
        "python benchmarks/decide/equal_requests.py"
        + ("" if defaults else f" --clients {args.clients} --questions {args.questions} --rounds {args.rounds}")
        + (f" --src DIR --label {args.label}" if args.src else "")
    )
    publish("equal_requests" + (f"_{args.label}" if args.label else ""), result, markdown(result))


if __name__ == "__main__":
    main()
