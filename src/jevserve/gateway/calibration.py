"""Calibration requests and how each decision scores them: the data a rate-based operating point is computed from.

A calibration file is JSON lines (optionally gzipped): the packaged everyday file (`data/everyday-calibration.jsonl.gz`,
ordinary user turns from the bench's train side in six shapes, written by `jevserve bench export-everyday`), or the
operator's own traffic in the same form (`{"id", "shape", "body": {"messages", "tools"}}`) or as a gateway decision
log (`{"request_id", "messages", "tools"}`). Every request counts as one on which acting is a false action, unless its
`labels` mark it positive for a decision (`"labels": {"guard": true}`): then it is left out of that decision's set.

The tool gate acts on the calls an upstream replied with, so its calibration requests carry them: `"tool_calls"`, an
OpenAI reply's list (`[{"function": {"name", "arguments"}}]`), each call one on which blocking is a false action. Its
packaged file (`data/tool-call-calibration.jsonl.gz`, written by `jevserve bench export-tool-calls`) holds ordinary
requests with the calls that answer them: BFCL's train side (shapes `curated` and `live`), and the scoped calls of the
composed tool-call templates held out for calibration (shape `scoped`: calls that change something, as asked).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.gateway.decider import Ask, Decider
from jevserve.gateway.errors import ConfigError
from jevserve.gateway.policies.base import Policy, RequestView
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.serving.decision_inputs import InputLimits, decision_inputs

PACKAGED_CALIBRATION = Path(__file__).parent / "data" / "everyday-calibration.jsonl.gz"
PACKAGED_TOOL_CALLS = Path(__file__).parent / "data" / "tool-call-calibration.jsonl.gz"
BATCH = 64  # requests scored per decision call


@dataclass(frozen=True)
class CalibrationRequest:
    """One request of a calibration file."""

    request_id: str
    shape: str  # the everyday shape ("bare", "system", ...), or "all" for a file without shapes
    body: Mapping[str, Any] = field(compare=False)
    labels: Mapping[str, bool] = field(default_factory=dict, compare=False)  # decision → True: not a negative
    tool_calls: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)  # the calls the upstream replied with


@dataclass(frozen=True)
class CalibrationSet:
    """A calibration file's requests and the digest of its bytes (part of every cache key made from it)."""

    path: Path
    digest: str
    requests: tuple[CalibrationRequest, ...]

    @property
    def name(self) -> str:
        """How reports name it: "packaged everyday", "packaged tool calls" or the file's path."""
        packaged = {PACKAGED_CALIBRATION: "packaged everyday", PACKAGED_TOOL_CALLS: "packaged tool calls"}
        return packaged.get(self.path, str(self.path))

    def negatives(self, decision: str) -> list[CalibrationRequest]:
        """The requests acting on which is a false action for `decision` (for the tool gate: those with calls)."""
        kept = [r for r in self.requests if not r.labels.get(decision, False)]
        return [r for r in kept if r.tool_calls] if decision == "tool_gate" else kept


def load_calibration(path: str | Path | None = None) -> CalibrationSet:
    """Read a calibration file (default: the packaged everyday file); raises ConfigError saying what is wrong."""
    path = Path(path) if path is not None else PACKAGED_CALIBRATION
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"calibration: cannot read {path}: {exc.strerror}") from None
    text = gzip.decompress(raw).decode("utf-8") if raw[:2] == b"\x1f\x8b" else raw.decode("utf-8")
    requests = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            requests.append(calibration_request(record, number))
        except (ValueError, TypeError, KeyError) as exc:
            raise ConfigError(f"calibration: {path} line {number} is not a calibration record ({exc})") from None
    if not requests:
        raise ConfigError(f"calibration: {path} holds no requests")
    return CalibrationSet(path, hashlib.sha256(raw).hexdigest(), tuple(requests))


def calibration_request(record: Mapping[str, Any], number: int = 0) -> CalibrationRequest:
    """One record of a calibration file (see the module docstring); raises KeyError or TypeError when it is not one."""
    if "body" in record:
        body = record["body"]
    elif "messages" in record:
        body = {"messages": record["messages"], "tools": record.get("tools") or []}
    else:
        raise KeyError("neither 'body' nor 'messages'")
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise TypeError("its messages are not a list")
    labels = record.get("labels") or {}
    calls = record.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
        raise TypeError("its tool_calls are not a list of calls")
    request_id = str(record.get("id") or record.get("request_id") or f"line-{number}")
    return CalibrationRequest(request_id, str(record.get("shape") or "all"), body, dict(labels), tuple(calls))


def score_requests(
    decider: Decider,
    policy: Policy,
    requests: Sequence[CalibrationRequest],
    limits: InputLimits,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The probability `policy` compares with its threshold, for each request (as the gateway would compute it);
    `done(n)` is told how many are scored after each decision call."""
    scores = np.zeros(len(requests))
    for start in range(0, len(requests), BATCH):
        chunk = requests[start : start + BATCH]
        views = [RequestView(decision_inputs(r.body, limits=limits)) for r in chunk]
        asks = [Ask(f"{i}|{a.question_id}", a.state, a.question) for i, v in enumerate(views) for a in policy.asks(v)]
        answers = decider.decide_blocking(asks)
        for i, view in enumerate(views):
            own = {k.partition("|")[2]: v for k, v in answers.items() if k.partition("|")[0] == str(i)}
            probability = policy.act(view, own).probability
            scores[start + i] = 0.0 if probability is None else probability
        if done is not None:
            done(start + len(chunk))
    return scores


def score_tool_calls(
    decider: Decider,
    gate: ToolGate,
    requests: Sequence[CalibrationRequest],
    limits: InputLimits,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """P(unsafe) of each call of each request, in order (as the gateway's tool gate would ask about it); `done(n)`
    is told how many calls are scored after each decision call."""
    asks, owners = [], []
    for r, request in enumerate(requests):
        user_text = decision_inputs(request.body, limits=limits).user_text
        for c, ask in enumerate(gate.asks_for_calls(user_text, request.tool_calls, limits)):
            asks.append(Ask(f"{r}|{c}|{ask.question_id}", ask.state, ask.question))
            owners.append(r)
    scores = np.zeros(len(asks))
    for start in range(0, len(asks), BATCH):
        answers = decider.decide_blocking(asks[start : start + BATCH])
        for offset, ask in enumerate(asks[start : start + BATCH]):
            scores[start + offset] = float(answers[ask.question_id][0])
        if done is not None:
            done(min(start + BATCH, len(asks)))
    return scores


def call_shapes(requests: Sequence[CalibrationRequest]) -> np.ndarray:
    """The shape of each call of each request (the order of score_tool_calls)."""
    return np.array([r.shape for r in requests for _ in r.tool_calls])
