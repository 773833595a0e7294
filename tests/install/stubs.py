"""Stand-ins for what a gateway talks to, on the standard library only: a System One endpoint and an OpenAI server.

Each runs in a thread of the test process on a free loopback port and counts what it was asked, so a test can show
that a request went through the decider and reached the upstream.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STUB_REPLY = "a reply from the stub upstream"


def systemone_answer(question: dict[str, Any]) -> dict[str, Any]:
    """A valid, uninformative answer to one question: yes with probability 0.1, options and levels uniform."""
    kind = question["type"]
    if kind == "noul":
        return {"type": "noul", "noul": 0.1}
    if kind == "choice":
        names = list(question["criteria"])
        return {"type": "choice", "choice": names[0], "probabilities": dict.fromkeys(names, 1 / len(names)),
                "confidence": 0.0}
    levels = question["criteria"]
    legend = {str(i): level if isinstance(level, str) else json.dumps(level) for i, level in enumerate(levels)}
    probabilities = {str(i): 1 / len(levels) for i in range(len(levels))}
    return {"type": "score", "score": (len(levels) - 1) / 2, "legend": legend, "probabilities": probabilities,
            "confidence": 0.0}


def chat_completion(model: str) -> dict[str, Any]:
    """An OpenAI chat completion whose text says it came from the stub."""
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": STUB_REPLY}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11},
    }


class _Handler(BaseHTTPRequestHandler):
    """Answers POST /v1/systemone and POST /v1/chat/completions; GET /v1/models lists one model of each kind."""

    hits: Counter[str]

    def do_GET(self) -> None:
        self.hits[self.path] += 1
        self._send({"object": "list", "data": [{"id": "stub-model", "object": "model"}],
                    "models": [{"name": "jev-latest", "description": "stub", "release_date": "2026-01-01"}]})

    def do_POST(self) -> None:
        self.hits[self.path] += 1
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.endswith("/v1/systemone"):
            answers = {qid: systemone_answer(q) for qid, q in body["questions"].items()}
            self._send({"model": "stub", "answers": answers, "usage": {"input_tokens": 1, "output_tokens": 0}})
        elif self.path.endswith("/chat/completions"):
            self._send(chat_completion(body.get("model", "stub-model")))
        else:
            self._send({"error": {"message": f"no route {self.path}"}}, status=404)

    def _send(self, payload: dict[str, Any], status: int = 200) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet: the tests read the counters
        return


@contextmanager
def stub_server() -> Iterator[tuple[str, Counter[str]]]:
    """A stub serving both APIs; yields its root URL and the hit counter by path."""
    hits: Counter[str] = Counter()
    handler = type("Handler", (_Handler,), {"hits": hits})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()
