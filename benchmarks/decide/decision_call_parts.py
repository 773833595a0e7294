"""Where the tuned reader's decision call spends its time: one encoder run over a state, and the readout per question.

For 100-token ShareGPT prompts (the latency benchmark's, `reader_gateway_latency.load_prompts`), each new to the
model: the encoder run (`StateEncoder.read`, one graph run for a state under 254 word pieces) timed alone with the
default intra-op threads and with one, and with an fp32 build of the same weights (what int8 saves), and the
readout of four gateway questions (guard, harm, clarify, length) over the state once it is encoded, per question.
Medians over the prompts, after warm-up.

Writes benchmarks/results/decision_call_parts.json and a section of docs/training.md.
Run: .venv/bin/python benchmarks/decide/decision_call_parts.py [--prompts 90]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reader_gateway_latency import load_prompts

from _serverbench import ROOT, machine, replace_section, write_result
from jevserve.decide.base import DecisionItem
from jevserve.decide.onnx_build import Precision
from jevserve.decide.tuned import tuned_backend
from jevserve.gateway.questions import DEFAULTS, wire_to_decision

WARM = 10
QUESTIONS = ("injection", "refuse", "ask", "length")


def measure(prompts: list[str], threads: int | None, precision: Precision = "int8") -> dict:
    """Median encoder and per-question readout milliseconds with `threads` intra-op threads (None: the default)."""
    if threads is not None:
        os.environ["JEVSERVE_INTRA_OP_THREADS"] = str(threads)
    backend = tuned_backend(precision)
    questions = [wire_to_decision(DEFAULTS[key]) for key in QUESTIONS]
    encoder, readout = [], []
    for i, text in enumerate(prompts):
        started = time.perf_counter()
        backend.states.read(text)
        encoded = time.perf_counter()
        backend.decide([DecisionItem(text, q) for q in questions])  # the state is cached: readout (and lookups) only
        done = time.perf_counter()
        if i >= WARM:
            encoder.append(encoded - started)
            readout.append((done - encoded) / len(questions))
    backend.close()
    os.environ.pop("JEVSERVE_INTRA_OP_THREADS", None)
    return {
        "precision": precision,
        "intra_op_threads": threads or "default",
        "encoder_ms_p50": 1000 * float(np.median(encoder)),
        "readout_ms_per_question_p50": 1000 * float(np.median(readout)),
    }


def markdown(result: dict) -> str:
    lines = [
        "### Where the decision call's time goes (generated)",
        "",
        f"`{result['command']}`, {result['machine']['when']}, load before {result['machine']['loadavg_before']:.2f}; "
        f"`minilm-tuned-reader`, {result['prompts']} 100-token ShareGPT prompts after {WARM} to warm up, medians.",
        "",
        "| graph | intra-op threads | encoder run over the state, ms | readout per question, ms |",
        "|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row.get('precision', 'int8')} | {row['intra_op_threads']} | {row['encoder_ms_p50']:.2f} | "
            f"{row['readout_ms_per_question_p50']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=90, help="prompts timed per setting (default 90)")
    args = parser.parse_args()
    per = args.prompts + WARM
    prompts = load_prompts(3 * per)
    result = {
        "machine": machine(),
        "command": "python benchmarks/decide/decision_call_parts.py"
        + (f" --prompts {args.prompts}" if args.prompts != 90 else ""),
        "prompts": args.prompts,
        # each setting gets prompts of its own, so no state is read from another's cache
        "rows": [measure(prompts[:per], None), measure(prompts[per : 2 * per], 1),
                 measure(prompts[2 * per :], None, "fp32")],
    }
    path = write_result("decision_call_parts", result)
    replace_section("decision_call_parts", markdown(result), path=ROOT / "docs" / "training.md")
    print(markdown(result))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
