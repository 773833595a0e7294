"""Calibration requests and how each decision scores them: the data a rate-based operating point is computed from.

A calibration file is JSON lines (optionally gzipped): the packaged everyday file (`data/everyday-calibration.jsonl.gz`,
ordinary user turns from the bench's train side in six shapes, written by `jevserve bench export-everyday`), or the
operator's own traffic in the same form (`{"id", "shape", "body": {"messages", "tools"}}`) or as a gateway decision
log (`{"request_id", "messages", "tools"}`). Every request counts as one on which acting is a false action, unless its
`labels` mark it positive for a decision (`"labels": {"guard": true}`) or leave it out of that decision
(`"labels": {"guard": null}`: neither, e.g. a harmful request in the guard's set): then it is left out of that
decision's set. Messages are OpenAI chat messages: a role other than OpenAI's ("human", "bot") is refused, since a
turn the gateway does not read as the user's would be scored as nothing to judge.

The tool gate acts on the calls an upstream replied with, so its calibration requests carry them: `"tool_calls"`, an
OpenAI reply's list (`[{"function": {"name", "arguments"}}]`), each call one on which blocking is a false action. Its
packaged file (`data/tool-call-calibration.jsonl.gz`, written by `jevserve bench export-tool-calls`) holds ordinary
requests with the calls that answer them: BFCL's train side (shapes `curated` and `live`), and the scoped calls of the
composed tool-call templates held out for calibration (shape `scoped`: calls that change something, as asked).

The cache acts by serving one request's cached answer to another, so its calibration records are pairs: `"cached"`,
the body of the request whose reply is cached, beside `"body"`, the new request; serving is a false action unless
`"labels": {"cache": true}` says one answer serves both. Its packaged file (`data/cache-calibration.jsonl.gz`,
written by `benchmarks/gateway/export_cache_calibration.py`) holds the first six blind-written pair sets of
`benchmarks/decide/` (hand-written by people shown none of the project's files; never fitted on), their kinds as
shapes (negation, swapped direction, other entity, other number, changed intent, ...).
"""

from __future__ import annotations

import difflib
import gzip
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.gateway.decider import Ask, Decider
from jevserve.gateway.errors import ConfigError
from jevserve.gateway.policies.base import CacheCandidate, Policy, RequestView
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.json_report import jsonl_lines
from jevserve.protocol.chat import CHAT_ROLES
from jevserve.serving.decision_inputs import InputLimits, decision_inputs

PACKAGED_CALIBRATION = Path(__file__).parent / "data" / "everyday-calibration.jsonl.gz"
PACKAGED_TOOL_CALLS = Path(__file__).parent / "data" / "tool-call-calibration.jsonl.gz"
PACKAGED_CACHE_PAIRS = Path(__file__).parent / "data" / "cache-calibration.jsonl.gz"
BATCH = 64  # requests scored per decision call


@dataclass(frozen=True)
class CalibrationRequest:
    """One request of a calibration file."""

    request_id: str
    shape: str  # the everyday shape ("bare", "system", ...), or "all" for a file without shapes
    body: Mapping[str, Any] = field(compare=False)
    # decision → True (acting is right), False (acting is a false action) or None (left out of that decision's set)
    labels: Mapping[str, bool | None] = field(default_factory=dict, compare=False)
    tool_calls: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)  # the calls the upstream replied with
    cached: Mapping[str, Any] | None = field(default=None, compare=False)  # a cache pair's cached request body
    # for a decision log's record: the decisions that acted on it when it was logged (a blocked request, a call the
    # gate held back); unlabelled, such a request still counts as a false action, which is rarely what is meant
    acted: frozenset[str] = field(default=frozenset(), compare=False)


@dataclass(frozen=True)
class CalibrationSet:
    """A calibration file's requests and the digest of its bytes (part of every cache key made from it)."""

    path: Path
    digest: str
    requests: tuple[CalibrationRequest, ...]

    @property
    def name(self) -> str:
        """How reports name it: "packaged everyday" (tool calls, cache pairs) or the file's path."""
        packaged = {
            PACKAGED_CALIBRATION: "packaged everyday",
            PACKAGED_TOOL_CALLS: "packaged tool calls",
            PACKAGED_CACHE_PAIRS: "packaged cache pairs",
        }
        return packaged.get(self.path, str(self.path))

    def acted_unlabelled(self, decision: str) -> int:
        """Requests of a decision log that `decision` acted on when logged and that carry no label for it."""
        return sum(1 for r in self.requests if decision in r.acted and decision not in r.labels)

    def negatives(self, decision: str) -> list[CalibrationRequest]:
        """The requests acting on which is a false action for `decision` (for the tool gate: those with calls; for
        the cache: the pairs)."""
        kept = [r for r in self.requests if r.labels.get(decision, False) is False]
        if decision == "tool_gate":
            return [r for r in kept if r.tool_calls]
        if decision == "cache":
            return [r for r in kept if r.cached is not None]
        return kept


def load_calibration(path: str | Path | None = None) -> CalibrationSet:
    """Read a calibration file (default: the packaged everyday file); raises ConfigError saying what is wrong."""
    path = Path(path).expanduser() if path is not None else PACKAGED_CALIBRATION  # YAML does not expand "~"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        packaged = " (did you mean `packaged`, the file jevserve ships, in lower case?)" if (
            path.name.lower() == "packaged" and path.name != "packaged") else ""
        raise ConfigError(f"calibration: cannot read {path}: {exc.strerror}{packaged}") from None
    text = gzip.decompress(raw).decode("utf-8") if raw[:2] == b"\x1f\x8b" else raw.decode("utf-8")
    if text.lstrip().startswith("["):
        raise ConfigError(f"calibration: {path} is a JSON array; expected JSON lines, one record per line "
                          "(docs/gateway.md, \"Operating points and modes\")")
    requests = []
    for number, line in enumerate(jsonl_lines(text), 1):
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
    _check_messages(body["messages"], "its")
    labels = record.get("labels") or {}
    if not isinstance(labels, Mapping) or not all(v is None or isinstance(v, bool) for v in labels.values()):
        raise TypeError('its labels are not an object of decision → true, false or null, e.g. {"guard": true}')
    for name in labels:  # a misspelt decision would leave the request counted as ordinary for the one meant
        if name not in LABELLED_DECISIONS:
            close = difflib.get_close_matches(str(name), LABELLED_DECISIONS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"expected one of {', '.join(LABELLED_DECISIONS)}"
            raise TypeError(f"its labels name {name!r}, no decision a rate is set for; {hint}")
    calls = record.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
        raise TypeError("its tool_calls are not a list of calls")
    cached = record.get("cached")
    if cached is not None and (not isinstance(cached, Mapping) or not isinstance(cached.get("messages"), list)):
        raise TypeError("its cached request is not a body with a list of messages")
    if cached is not None:
        _check_messages(cached["messages"], "its cached request's")
    request_id = str(record.get("id") or record.get("request_id") or f"line-{number}")
    shape = str(record.get("shape") or "all")
    return CalibrationRequest(request_id, shape, body, dict(labels), tuple(calls), cached, _logged_actions(record))


def _logged_actions(record: Mapping[str, Any]) -> frozenset[str]:
    """The decisions a decision log's record says acted (or, in shadow mode, would have): any action but allow."""
    decisions = record.get("decisions")
    verdicts = decisions.get("verdicts") if isinstance(decisions, Mapping) else None
    verdicts = [*(verdicts if isinstance(verdicts, list) else []),
                *(record.get("tool_gate") if isinstance(record.get("tool_gate"), list) else [])]
    return frozenset(
        str(v.get("decision")) for v in verdicts
        if isinstance(v, Mapping) and not str(v.get("action", "allow")).startswith(("allow", "skip"))
    )


LABELLED_DECISIONS = ("guard", "harm", "clarify", "tool_gate", "cache")  # the decisions a rate is set for


def _check_messages(messages: list, whose: str) -> None:
    """Raise TypeError naming the first message that is not an OpenAI chat message with a known role."""
    for number, message in enumerate(messages, 1):
        if not isinstance(message, Mapping):
            raise TypeError(f"{whose} message {number} is not an object with a role and content")
        role = message.get("role")
        if role not in CHAT_ROLES:
            raise TypeError(f"{whose} message {number} has role {role!r}; expected one of {', '.join(CHAT_ROLES)} "
                            "(OpenAI's chat roles: write 'human' as 'user')")


PATIENT_TRIES = 6  # a calibration's decision call asked this often before the scoring stops
PATIENT_BACKOFF_S = 1.0  # doubled after each try, unless the decider said how long to wait (its 429's Retry-After)


def decide_patiently(decider: Decider, asks: Sequence[Ask], *, sleep: Callable[[float], None] = time.sleep) -> dict:
    """`decider.decide_blocking(asks)`, asked again after a refusal for load (429: after its Retry-After), a server
    error or a timeout, up to PATIENT_TRIES times: scoring a calibration file through a remote decider takes
    minutes, and one 429 after 309 answered requests stopped it, keeping nothing (an outside tester's)."""
    from jevserve.decide.remote import UpstreamTimeout
    from jevserve.protocol.errors import BackendError, OverloadedError

    wait_s = PATIENT_BACKOFF_S
    for _ in range(PATIENT_TRIES - 1):
        try:
            return decider.decide_blocking(asks)
        except (OverloadedError, UpstreamTimeout, BackendError) as exc:
            passing = isinstance(exc, OverloadedError | UpstreamTimeout) or \
                (getattr(exc, "upstream_status", 0) or 0) >= 500
            if not passing:  # a refused key, a model not served: asking again gets the same answer
                raise
            told = getattr(exc, "retry_after_s", None)
            sleep(told if told is not None else wait_s)
            wait_s *= 2
    return decider.decide_blocking(asks)


def score_requests(
    decider: Decider,
    policy: Policy,
    requests: Sequence[CalibrationRequest],
    limits: InputLimits,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The probability `policy` compares with its threshold, for each request (as the gateway would compute it);
    `done(n)` is told how many are scored after each decision call."""
    return _score_views(decider, policy, requests, lambda r: RequestView(decision_inputs(r.body, limits=limits)), done)


def judged_requests(policy: Policy, requests: Sequence[CalibrationRequest], limits: InputLimits) -> np.ndarray:
    """Which requests `policy` asks anything about (no decider needed): one it asks nothing about (no user turn, say)
    is never acted on, so it cannot be a false action and is left out of the rate."""
    return np.array([bool(policy.asks(RequestView(decision_inputs(r.body, limits=limits)))) for r in requests],
                    dtype=bool)


def _score_views(
    decider: Decider,
    policy: Policy,
    requests: Sequence[CalibrationRequest],
    view_of: Callable[[CalibrationRequest], RequestView],
    done: Callable[[int], None] | None,
) -> np.ndarray:
    scores = np.zeros(len(requests))
    for start in range(0, len(requests), BATCH):
        chunk = requests[start : start + BATCH]
        views = [view_of(r) for r in chunk]
        # each ask as the policy made it (a guard window keeps the text it is read within), under an id of its request
        asks = [replace(a, question_id=f"{i}|{a.question_id}") for i, v in enumerate(views) for a in policy.asks(v)]
        answers = decide_patiently(decider, asks)
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
            asks.append(replace(ask, question_id=f"{r}|{c}|{ask.question_id}"))
            owners.append(r)
    scores = np.zeros(len(asks))
    for start in range(0, len(asks), BATCH):
        answers = decide_patiently(decider, asks[start : start + BATCH])
        for offset, ask in enumerate(asks[start : start + BATCH]):
            scores[start + offset] = float(answers[ask.question_id][0])
        if done is not None:
            done(min(start + BATCH, len(asks)))
    return scores


def score_cache_pairs(
    decider: Decider,
    policy: Policy,
    requests: Sequence[CalibrationRequest],
    limits: InputLimits,
    done: Callable[[int], None] | None = None,
) -> np.ndarray:
    """P(reuse) of each pair, asked as the gateway's cache asks about its nearest entry (the cached conversation's
    text beside the new one's); `done(n)` is told how many are scored after each decision call.

    Every pair is asked about whatever the two texts' cosine (live, a pair under `min_similarity` is never asked), so
    a threshold read off every pair holds for any `min_similarity`."""

    def view_of(request: CalibrationRequest) -> RequestView:
        if request.cached is None:
            raise ValueError(f"calibration request {request.request_id} is not a cache pair (no 'cached')")
        cached_text = decision_inputs(request.cached, limits=limits).cache_text
        candidate = CacheCandidate("semantic", request.request_id, cached_text, 1.0, {})
        return RequestView(decision_inputs(request.body, limits=limits), cache_candidate=candidate)

    return _score_views(decider, policy, requests, view_of, done)


def call_shapes(requests: Sequence[CalibrationRequest]) -> np.ndarray:
    """The shape of each call of each request (the order of score_tool_calls)."""
    return np.array([r.shape for r in requests for _ in r.tool_calls])
