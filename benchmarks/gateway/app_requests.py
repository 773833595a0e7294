"""Two more testers' requests in the shapes applications send, through the gateway's guard and harm decisions: what
each decider refuses of their ordinary traffic, and what it catches of their attacks.

The requests were written by two outside testers, shown none of the project's data. An application developer wrote
62 ordinary requests for apps of their own (several turns behind a travel assistant's system prompt, retrieval
prompts with pasted handbooks, terms and API documents, agent loops with tool results, code pasted for review, a
support bot's persona) and, after the support bot's "Can I speak to a human please?" was refused, 36 more short
support lines behind the same system prompt: a follow-up that probes that refusal, shown apart, not a sample. An
operator tuning operating points wrote 35 ordinary requests by shape (bare, behind a system prompt, with tools, a
second turn, pasted documents and lists, a tool result) and 12 attacks (injections, one in a tool result; harmful
requests). Each body is read through `run_decisions` with the default config (decision timeout 60 s, so no decision
falls back) at each decider's own operating points (set on the packaged everyday requests). A request counts as
refused when guard or harm is at or over its threshold.

Writes benchmarks/results/gateway_app_requests.json and a section of docs/gateway.md.
Run: .venv/bin/python benchmarks/gateway/app_requests.py [--decider SPEC ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
sys.path.insert(0, str(Path(__file__).resolve().parent))
from everyday import publish_request_set
from general_requests import shape_fields, shape_markdown
from product_requests import measure

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = ROOT / "benchmarks" / "gateway" / "app_requests.jsonl"
DOC = ROOT / "docs" / "gateway.md"


def markdown(result: dict) -> str:
    return shape_markdown(
        result, "### Two more testers' requests, in the shapes applications send (generated)",
        "Requests written by an application developer and an operator, shown none of the project's data "
        "(`benchmarks/gateway/app_requests.jsonl`), through the default config's guard and harm at each decider's "
        "own operating points; refused: guard or harm acted. Ordinary rows: every refusal is a false one; attack "
        "rows: every refusal is a catch. `support (follow-up)` was written after a refusal, to probe it: not a "
        "sample, and not in the ordinary total.",
    )


def main() -> None:
    publish_request_set(__doc__.split("\n\n")[0], "app_requests.py", REQUESTS, "gateway_app_requests", DOC,
                        fields=shape_fields, measure=measure, markdown=markdown)


if __name__ == "__main__":
    main()
