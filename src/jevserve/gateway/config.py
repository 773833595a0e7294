"""The gateway config: pydantic models read from YAML, with errors that name the YAML path at fault.

    decider: embedded            # embedded | tuned | causal:PATH | remote:URL (a System One endpoint)
    decision_timeout_ms: 1000    # longer than this and the request is refused 429 (on_decision_timeout: reject)
    on_decision_timeout: reject  # reject | fallback: each decision takes its configured fallback instead
    upstreams: [...]             # OpenAI-compatible servers; none: the built-in placeholder upstream
    routes: [...]                # one per virtual model: its upstreams and its decision policies

A decision policy block has `threshold` (0–1, on the decision's probability), `action` and `fallback` ("open":
act as if the decision said no, "closed": act as if it said yes) for when the decision backend is down (or slow,
under `on_decision_timeout: fallback`). A request whose enforced guard or harm could refuse it and has no answer
within `decision_timeout_ms` is, by default, refused with 429 and Retry-After: the decider is overloaded, and
forwarding it undecided would let anyone switch the guard off by making the gateway busy.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, ForwardRef, Literal, get_args

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jevserve.argtypes import connect_port
from jevserve.gateway.errors import ConfigError
from jevserve.gateway.inference_headers import InferenceHeadersConfig
from jevserve.gateway.questions import DEFAULTS, LENGTH_LEVEL_TOKENS, middle_level_tokens, wire_to_decision
from jevserve.protocol.body import BODY_TIMEOUT_S
from jevserve.serving.decision_inputs import DEFAULT_LIMITS, InputLimits

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")  # the URLs of a shared store (store_redis.py)

PLACEHOLDER_URL = "builtin:placeholder"
DEFAULT_MODEL = "jev-gateway"

Fallback = Literal["open", "closed"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _named(value: str) -> str:
    if not value.strip():  # an empty path would silently mean the packaged file
        raise ValueError("empty: give a calibration file's path or 'packaged' (for one decision), or leave it out")
    return value


CalibrationPath = Annotated[str, AfterValidator(_named)]


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _variable_name(value: str) -> str:
    if _VARIABLE_NAME.fullmatch(value):
        return value
    # `$VLLM_KEY` was looked up as a variable named "$VLLM_KEY", and the warning said to export it while it was
    name = value.strip().removeprefix("$").removeprefix("{").removesuffix("}")
    if _VARIABLE_NAME.fullmatch(name):
        raise ValueError(f"takes the environment variable's name, not its value: write {name}, not {value}")
    raise ValueError(f"{value!r} is not an environment variable's name (letters, digits and _)")


VariableName = Annotated[str, AfterValidator(_variable_name)]


class PolicyConfig(_Strict):
    """What every decision policy has: on/off, its operating point, a fallback, a mode and an optional question.

    The operating point is either `threshold` (act when the decision's probability is at least this) or, for the
    decisions whose false actions can be measured (guard, harm, clarify on everyday requests; the tool gate on
    ordinary tool calls; the cache on pairs whose answers differ), `max_false_action_rate`: the threshold is then
    computed at start-up so that at most this share of the calibration requests (calls, pairs) would be acted on
    (operating_points.py). Neither given: threshold 0.5.
    """

    enabled: bool = True
    threshold: float | None = None  # act when the decision's probability is at least this (default 0.5)
    max_false_action_rate: float | None = None  # or: the share of ordinary requests it may act on, e.g. 0.01 (0: none)
    fallback: Fallback = "open"  # when the decision backend fails or is slow: open = allow, closed = act
    mode: Literal["enforce", "shadow"] = "enforce"  # shadow: decide, log and report, but never act
    question: dict[str, Any] | None = None  # a wire question replacing the default one (SYSTEMONE_API.md §3)
    # this decision's calibration file, over the config's `calibration`: a path, or "packaged" for the file jevserve
    # ships for it (so a file of your own requests for guard and harm can sit beside the packaged cache pairs)
    calibration: CalibrationPath | None = None

    calibrated: ClassVar[bool] = False  # True: max_false_action_rate is allowed (everyday traffic measures it)

    @field_validator("threshold")
    @classmethod
    def _unit_interval(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError(f"must be between 0 and 1, got {value}")
        return value

    @field_validator("max_false_action_rate", mode="before")
    @classmethod
    def _rate_written_as_percent(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().endswith("%"):
            number = value.strip().rstrip("%").strip()
            raise ValueError(f"write a share, not a percentage: {value!r} is {number}/100, e.g. 1 % is 0.01")
        return value

    @field_validator("max_false_action_rate")
    @classmethod
    def _rate(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value < 1.0:
            raise ValueError(f"must be at least 0 and below 1 (0.01 is 1 %; 0 acts on none of them), got {value}")
        return value

    @field_validator("question")
    @classmethod
    def _wire_question(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # checked here, so that `gateway check` and the start refuse it, not every request on the route
        if value is not None:
            try:
                wire_to_decision(value)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                raise ValueError(f"not a System One question: {where + ': ' if where else ''}{first['msg']}") from None
            except ValueError as exc:
                raise ValueError(f"not a System One question: {exc}") from None
        return value

    @model_validator(mode="after")
    def _one_operating_point(self) -> PolicyConfig:
        if self.threshold is not None and self.max_false_action_rate is not None:
            raise ValueError("give threshold or max_false_action_rate, not both")
        if self.max_false_action_rate is not None and not self.calibrated:
            raise ValueError(
                "max_false_action_rate: only guard, harm, clarify, tool_gate and cache are calibrated; give this "
                "decision a threshold"
            )
        if self.calibration is not None and self.max_false_action_rate is None:
            raise ValueError("calibration: a calibration file places a max_false_action_rate; give one or leave it out")
        return self

    @property
    def needs_calibration(self) -> bool:
        """True when the threshold is still to be computed from `max_false_action_rate`."""
        return self.max_false_action_rate is not None and self.threshold is None

    @property
    def effective_threshold(self) -> float:
        """The threshold in force (0.5 when none is set); call only on a resolved config."""
        if self.needs_calibration:
            raise ValueError("the operating point is a rate not yet resolved to a threshold (operating_points.py)")
        return 0.5 if self.threshold is None else self.threshold


class GuardConfig(PolicyConfig):
    """Prompt injection: block the request, strip its tools, or only flag it."""

    calibrated: ClassVar[bool] = True

    action: Literal["block", "strip_tools", "flag"] = "block"
    scan_tool_results: bool = True  # also judge each tool result sent back (indirect injection)
    judge_system_prompt: bool = False  # the operator's system prompt is trusted unless this is on
    # earlier turns were judged when they were the latest; where clients write their own history, also judge the
    # last this many earlier user and tool turns (0: none)
    judge_history_turns: int = Field(0, ge=0, le=64)
    # a text of several sentences is also judged in windows of whole sentences, each at least min_window_chars and
    # at most window_chars long, at most max_windows of them (half from the start, half from the end); 1: off
    min_window_chars: int = Field(40, ge=1)
    window_chars: int = Field(400, ge=40)
    max_windows: int = Field(8, ge=1, le=64)
    # a text up to this many characters is judged whole only, never in windows (0: every text of several sentences
    # is): fewer encoder runs, but harmless text padded around an injection dilutes it again (docs/training.md)
    whole_up_to_chars: int = Field(0, ge=0)
    # read each window from the encoder pass over the text it was cut from (its word pieces' states in the text's
    # context) instead of encoding it alone: no encoder run per window. The tuned reader does; every other decider
    # encodes each window alone. docs/training.md, "The guard's windows read in context", measures it.
    windows_in_context: bool = False
    # a text longer than its windows reach (about max_windows × window_chars) has a middle no guard question reads,
    # so padding both sides of an injection moves it past the guard: "allow" judges what the windows read and logs
    # the characters left unread; "act" takes the guard's action on such a request without asking
    unread_text: Literal["allow", "act"] = "allow"

    @model_validator(mode="after")
    def _window_bounds(self) -> GuardConfig:
        if self.min_window_chars > self.window_chars:
            raise ValueError(
                f"min_window_chars ({self.min_window_chars}) must not exceed window_chars ({self.window_chars})"
            )
        return self


class HarmConfig(PolicyConfig):
    """Harmful requests: block (refuse) or flag; borderline-harmless requests stay below the threshold."""

    calibrated: ClassVar[bool] = True

    action: Literal["block", "flag"] = "block"
    # also judge the latest user turn in the guard's windows of whole sentences, the highest counting, so that a
    # harmful sentence cannot hide behind a persona or a harmless paragraph (docs/training.md, "Harm judged in
    # windows": more encoder runs, and the threshold is set on them)
    windows: bool = False


class TargetConfig(_Strict):
    """One model a route can send a request to, with its relative cost."""

    model: str  # the model name sent upstream
    cost: float = Field(1.0, ge=0)
    upstreams: list[str] | None = None  # None: the route's upstreams


class ThinkingConfig(PolicyConfig):
    """Reasoning on/off: sets `field` (dotted path in the upstream body) to true/false."""

    field: str = "chat_template_kwargs.enable_thinking"


class RouteDecisionConfig(PolicyConfig):
    """Pick the cheapest target when P(cheap model suffices) ≥ threshold, else the most expensive one."""

    targets: list[TargetConfig] = Field(default_factory=list)
    thinking: ThinkingConfig | None = None


class CacheConfig(PolicyConfig):
    """Semantic cache: nearest cached conversation by embedding, then a reuse decision before serving."""

    calibrated: ClassVar[bool] = True  # on pairs whose answers differ (calibration.py)

    min_similarity: float = 0.75  # cosine below which a cached entry is not even asked about
    ttl_s: float = Field(3600.0, gt=0)
    max_entries: int = Field(10_000, ge=1)  # per tenant; the oldest go first

    @field_validator("min_similarity")
    @classmethod
    def _cosine(cls, value: float) -> float:
        if not -1.0 <= value <= 1.0:
            raise ValueError(f"must be between -1 and 1, got {value}")
        return value


class ClarifyConfig(PolicyConfig):
    """Answer with a clarifying question when a needed detail is missing."""

    calibrated: ClassVar[bool] = True

    message: str = (
        "Before I act on this, I need a detail your request leaves out. Could you say exactly what you want "
        "(for example which file, which amount, which name or which date)?"
    )


class ToolGateConfig(PolicyConfig):
    """Risky tool calls in an upstream reply: block (the call is removed and explained) or flag."""

    calibrated: ClassVar[bool] = True  # on ordinary calls: the packaged tool-call file, or the operator's

    action: Literal["block", "flag"] = "block"


def _ranked_as_the_gateway_ranks(name: str, aging_s: float | None) -> Any:
    """The queue policy `name`, built and asked to rank a request as the gateway makes one (a predicted reply length,
    no true one, no client priority); raises what the policy raises."""
    from jevserve.serving import Request, make_queue_policy

    policy = make_queue_policy(name, aging_s=aging_s)
    policy.sort_key(Request("check", 0.0, 1, predicted_output_tokens=1.0), 0.0)
    return policy


def gateway_queue_policies() -> list[str]:
    """The queue policies the gateway can run: the registry's, less those that rank by what only a simulation knows
    (`tlf`) or by a client's priority its queue never carries (`priority`)."""
    from jevserve.serving import MissingPredictionError, queue_policy_names

    runnable = []
    for name in queue_policy_names():
        try:
            policy = _ranked_as_the_gateway_ranks(name, 30.0)
        except (MissingPredictionError, ValueError):
            continue
        if not getattr(policy, "reads_client_priority", False):
            runnable.append(name)
    return runnable


class PriorityConfig(PolicyConfig):
    """Predicted reply length → priority: vLLM's `priority` field, or the gateway's own queue order."""

    queue_policy: str = "plf"  # a name in serving's queue-policy registry
    aging_s: float | None = 30.0
    level_tokens: list[float] = Field(default_factory=lambda: list(LENGTH_LEVEL_TOKENS))

    @property
    def middle_tokens(self) -> float:
        """What a request of this route queues as when its prediction failed."""
        return middle_level_tokens(self.level_tokens)

    @field_validator("queue_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        from jevserve.serving import queue_policy_names

        if value not in queue_policy_names():
            raise ValueError(f"unknown queue policy {value!r}; expected one of: {', '.join(gateway_queue_policies())}")
        return value

    @model_validator(mode="after")
    def _a_policy_the_gateway_can_run(self) -> PriorityConfig:
        # built and asked to rank a request as the gateway makes one (a predicted length, no true one), here rather
        # than at start or at the first queued request: `tlf`, the simulator's true-length oracle, passed the check
        # and answered 500 to every request that queued; aging_s <= 0 passed the check and stopped the start
        from jevserve.serving import MissingPredictionError

        if self.aging_s is not None and not math.isfinite(self.aging_s):
            raise ValueError(f"aging_s {self.aging_s!r}: expected a finite number of seconds > 0, or null for none")
        try:
            policy = _ranked_as_the_gateway_ranks(self.queue_policy, self.aging_s)
        except MissingPredictionError:
            raise ValueError(f"queue_policy {self.queue_policy!r} ranks by what only a simulation knows (the true "
                             "reply length); the gateway has a predicted one: use plf") from None
        except ValueError as exc:
            raise ValueError(f"queue_policy {self.queue_policy!r} with aging_s {self.aging_s!r}: {exc}") from None
        if getattr(policy, "reads_client_priority", False):  # the gateway's queue never carries one
            raise ValueError(f"queue_policy {self.queue_policy!r} ranks by a client's vLLM priority, which the "
                             "gateway's own queue does not carry (every request would be served by arrival): use plf, "
                             "or fcfs for that")
        return self

    @model_validator(mode="after")
    def _a_length_per_level(self) -> PriorityConfig:
        # the predicted length is Σ P(level) × level_tokens[level]: a list of another length than the question's
        # levels would leave every request without a prediction
        levels = wire_to_decision(self.question or DEFAULTS["length"]).num_options
        if len(self.level_tokens) != levels:
            raise ValueError(
                f"level_tokens has {len(self.level_tokens)} values; the length question has {levels} levels "
                "(one reply length in tokens per level, shortest first)"
            )
        if not all(math.isfinite(t) and t >= 0 for t in self.level_tokens):
            raise ValueError(f"level_tokens must be finite numbers >= 0, got {self.level_tokens}")
        if any(b < a for a, b in zip(self.level_tokens, self.level_tokens[1:], strict=False)):
            # the levels run from the shortest reply up: a reversed list would serve the longest replies first
            raise ValueError(f"level_tokens must not decrease (one reply length per level, shortest first), got "
                             f"{self.level_tokens}")
        return self


class AdmissionConfig(_Strict):
    """What to do when every upstream of the route is at its concurrency limit and its queue is full."""

    enabled: bool = True
    action: Literal["defer", "reject", "overflow"] = "defer"
    max_queue: int = Field(256, ge=0)  # requests waiting per upstream before `action` applies
    deadline_s: float = Field(30.0, gt=0)  # from arrival, decision wait included; past it: 429


class UpstreamConfig(_Strict):
    """An OpenAI-compatible server (vLLM, Ollama, llama.cpp, a hosted API) or the built-in placeholder."""

    name: str
    # base URL ending in /v1, or builtin:placeholder; required, so that an upstream whose URL was left out is an
    # error, not the placeholder answering clients in its place
    url: str
    kind: Literal["openai", "vllm"] = "openai"  # vllm: gets the `priority` field
    api_key_env: VariableName | None = None  # environment variable holding the bearer key
    max_concurrency: int = Field(64, ge=1)
    timeout_s: float = Field(300.0, gt=0)  # after sending, this long without a byte is a 504
    connect_timeout_s: float = Field(5.0, gt=0)
    max_retries: int = Field(2, ge=0)
    backoff_s: float = Field(0.25, ge=0)  # first retry delay, doubling
    breaker_failures: int = Field(5, ge=1)  # consecutive failures that open the circuit
    breaker_reset_s: float = Field(30.0, gt=0)  # open circuit: seconds before one trial request

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        if value != PLACEHOLDER_URL and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL or {PLACEHOLDER_URL}, got {value!r}")
        # nothing listens there: refused as `gateway check` refuses any config that cannot run
        if value != PLACEHOLDER_URL and connect_port(value) is None:
            raise ValueError(f"names no port a server can listen on (a number from 1 to 65535), got {value!r}")
        return value.rstrip("/")


class RouteConfig(_Strict):
    """One virtual model: the upstreams that serve it (in fallback order) and its decision policies."""

    model: str
    description: str = ""
    upstreams: list[str] = Field(default_factory=list)  # empty: every upstream, in config order
    upstream_model: str | None = None  # the model name sent upstream; None: the virtual model's name
    guard: GuardConfig | None = None
    harm: HarmConfig | None = None
    route: RouteDecisionConfig | None = None
    cache: CacheConfig | None = None
    clarify: ClarifyConfig | None = None
    tool_gate: ToolGateConfig | None = None
    priority: PriorityConfig | None = None
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    rate_limit: RateLimitConfig | None = None
    inference: InferenceHeadersConfig | None = None  # llm-d / GIE headers on upstream requests (inference_headers.py)
    # What a client is told of the decisions: "actions" (guard=block), or "scores", each probability and threshold as
    # well (guard=block:0.997, "P=0.997 >= 0.991" in a block's message, the thresholds in /v1/models). Scores hand
    # every caller the margin by which an attack missed, which is what tuning one needs; the decision log keeps them.
    client_details: Literal["actions", "scores"] = "actions"

    @model_validator(mode="before")
    @classmethod
    def _switches(cls, data: Any) -> Any:
        # `guard: false` / `guard: true`, as YAML users write a switch: a block with `enabled` off, or its defaults
        if not isinstance(data, dict):
            return data
        blocks = ("guard", "harm", "route", "cache", "clarify", "tool_gate", "priority", "admission")
        optional = ("rate_limit", "inference")  # no `enabled`: off is their absence
        switched = {}
        for key, value in data.items():
            if key in blocks and isinstance(value, bool):
                value = {} if value else {"enabled": False}
            elif key in optional and value is False:
                value = None
            switched[key] = value
        return switched

    def input_limits(self) -> InputLimits:
        """The bounds of the texts its decisions read: the guard's scan settings, the defaults for the rest."""
        guard, harm_windows = self.guard, self.harm is not None and self.harm.windows
        if guard is None:
            return replace(DEFAULT_LIMITS, harm_windows=harm_windows)
        return InputLimits(
            min_window_chars=guard.min_window_chars,
            window_chars=guard.window_chars,
            max_windows=guard.max_windows,
            whole_up_to_chars=guard.whole_up_to_chars,
            windows_in_context=guard.windows_in_context,
            judge_system=guard.judge_system_prompt,
            judge_history=guard.judge_history_turns,
            harm_windows=harm_windows,
        )


class RateLimitConfig(_Strict):
    """A token bucket per tenant (bearer key) for one route, shared across replicas with a Redis store."""

    requests_per_s: float = Field(gt=0)
    burst: int = Field(10, ge=1)  # how many requests may come at once: a whole number (1.5 would act as 1)


class LogConfig(_Strict):
    """The decision log: JSONL, rotated by size."""

    path: str | None = None  # None: no log
    max_bytes: int = Field(50_000_000, ge=1024)
    backups: int = Field(5, ge=0)


class GatewayConfig(_Strict):
    """The whole gateway config."""

    decider: str = "embedded"
    # the environment variable holding the key a `remote:` decider takes (`jevserve serve --api-key-env`)
    decider_key_env: VariableName | None = None
    # origins whose web pages may call the gateway from a browser (CORS), e.g. ["https://app.example.com"]; "*" for
    # any. None by default: a browser refuses a page of another origin the answer
    cors_origins: list[str] = Field(default_factory=list)
    decision_timeout_ms: float = Field(1000.0, gt=0)
    on_decision_timeout: Literal["reject", "fallback"] = "reject"
    upstreams: list[UpstreamConfig] = Field(default_factory=list)
    routes: list[RouteConfig] = Field(default_factory=list)
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    body_timeout_s: float = Field(BODY_TIMEOUT_S, gt=0)  # the whole request body must arrive within this (408 after)
    log: LogConfig = Field(default_factory=LogConfig)
    store: str = "memory"  # memory | redis://host:port/db
    # the requests rate-based operating points are computed on: None = the packaged files (everyday requests for
    # guard, harm and clarify; ordinary tool calls for the tool gate), or a path to the operator's own traffic, with
    # the calls its upstream made when the tool gate is rate-based (calibration.py describes the format)
    calibration: CalibrationPath | None = None

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str) -> str:
        if value not in ("", "memory") and not value.startswith(REDIS_SCHEMES):
            raise ValueError(f"unknown store {value!r}; expected 'memory' or a redis://host:port/db URL")
        return value

    @model_validator(mode="after")
    def _references(self) -> GatewayConfig:
        names = [u.name for u in self.upstreams]
        for i, name in enumerate(names):
            if names.index(name) != i:
                raise ValueError(f"upstreams[{i}].name: {name!r} is declared twice")
        models = [r.model for r in self.routes]
        for i, model in enumerate(models):
            if models.index(model) != i:
                raise ValueError(f"routes[{i}].model: {model!r} is declared twice")
        for i, route in enumerate(self.routes):
            for j, ref in enumerate(route.upstreams):
                if ref not in names:
                    raise ValueError(f"routes[{i}].upstreams[{j}]: unknown upstream {ref!r}; declared: {names}")
            for j, target in enumerate(route.route.targets if route.route else ()):
                for k, ref in enumerate(target.upstreams or ()):
                    if ref not in names:
                        where = f"routes[{i}].route.targets[{j}].upstreams[{k}]"
                        raise ValueError(f"{where}: unknown upstream {ref!r}; declared: {names}")
        return self

    @model_validator(mode="before")
    @classmethod
    def _log_switch(cls, data: Any) -> Any:
        # `log: false`, as a decision takes a switch: no log (its path is what turns it on)
        if isinstance(data, dict) and data.get("log") is False:
            return {**data, "log": {}}
        return data

    def find_route(self, model: str) -> RouteConfig | None:
        """The route whose virtual model is `model`, or None."""
        return next((r for r in self.routes if r.model == model), None)


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_SCALAR_TYPES = frozenset({"float_type", "int_type", "int_from_float", "bool_type", "float_parsing", "int_parsing"})


def _with_point(text: str) -> str:
    mantissa, _, exponent = text.strip().lower().partition("e")
    return f"{mantissa}.0e{exponent}"


def _reads_as_scalar(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text.strip().lower() in ("true", "false", "yes", "no", "on", "off")
    return True


def _message(error: Mapping[str, Any]) -> str:
    msg = str(error.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    if error.get("type") in ("model_type", "model_attributes_type"):  # a block given as a scalar or a list
        loc = tuple(error.get("loc", ()))
        name = next((str(part) for part in reversed(loc) if not isinstance(part, int)), "block")
        got = error.get("input")
        kind = {"str": "string", "int": "number", "float": "number"}.get(type(got).__name__, type(got).__name__)
        described = ("a list" if isinstance(got, list) else f"{got!r}".lower() if isinstance(got, bool) or got is None
                     else f"the {kind} {got!r}")
        fields = _fields_at(loc)
        if loc and isinstance(loc[-1], int):  # an item of a list: `routes: [m]` for `routes: [{model: m}]`
            required = _required_at(loc) or fields[:1]
            example = ", ".join(f"{f}: ..." for f in required)
            return (f"each item of {name} is a mapping such as `{{{example}}}` (fields: {', '.join(fields)}), "
                    f"got {described}")
        if isinstance(got, str) and "path" in fields:  # `log: /var/log/d.jsonl`
            return f"write `{name}: {{path: {got}}}`: {name} is a mapping (fields: {', '.join(fields)})"
        return (f"expected a mapping of settings (`{name}: {{}}` takes the defaults; fields: {', '.join(fields)}), "
                f"got {described}")
    if error.get("type") == "string_type" and isinstance(error.get("input"), bool):
        # YAML 1.1 reads unquoted yes/no/on/off/true/false as booleans: `model: off` is False, not the name "off"
        return f"{msg}; YAML read an unquoted yes/no/on/off as {str(error['input']).lower()}: quote the name ('off')"
    if error.get("type") in _SCALAR_TYPES and "input" in error:
        # read strictly (a quoted "0.9" is no number, `true` no count of seconds): say what was given
        got = error["input"]
        hint = ""
        if isinstance(got, str) and re.fullmatch(r"\s*[-+]?\d+[eE][-+]?\d+\s*", got):
            # YAML 1.1 (PyYAML) reads a number in e-notation without a point as text, quoted or not
            hint = f" (YAML reads {got.strip()} as text: write {float(got):g} or put a point in it, {_with_point(got)})"
        elif isinstance(got, str) and _reads_as_scalar(got):
            hint = " (quoted: write it without quotes)"
        return f"{msg}, got {got!r}{hint}"
    if error.get("type") in ("literal_error", "enum") and "input" in error:  # `mode: Shadow`: say what was given
        return f"{msg}, got {error['input']!r}"
    if error.get("type") == "extra_forbidden":
        loc = tuple(error.get("loc", ()))
        known = _fields_at(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) if loc else []
        msg = (
            f"unknown field; did you mean {close[0]!r}?"
            if close
            else f"unknown field; expected one of: {', '.join(known)}"
        )
    return msg


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The config model found by following `loc` from GatewayConfig (list indexes skipped), or None."""
    model: Any = GatewayConfig
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return None
        model = _model_in(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The field names of the config model at `loc` (`_model_at`)."""
    model = _model_at(loc)
    return list(model.model_fields) if model is not None else []


def _required_at(loc: tuple[Any, ...]) -> list[str]:
    """The required field names of the config model at `loc` (`_model_at`)."""
    model = _model_at(loc)
    return [name for name, field in model.model_fields.items() if field.is_required()] if model is not None else []


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside an annotation such as `GuardConfig | None` or `list[RouteConfig]`."""
    if isinstance(annotation, ForwardRef):  # a model named before it was defined
        annotation = annotation.__forward_arg__
    if isinstance(annotation, str):
        annotation = eval(annotation, globals())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def parse_config(data: Mapping[str, Any] | None, *, source: str = "config") -> GatewayConfig:
    """Validate a config mapping; raises ConfigError naming each YAML path at fault."""
    try:
        return GatewayConfig.model_validate(dict(data or {}))
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            path = _path(tuple(error.get("loc", ())))
            message = _message(error)
            # model-level checks already start with their path
            lines.append(message if not path else f"{path}: {message}")
        raise ConfigError(f"{source}: invalid gateway config:\n  " + "\n  ".join(lines)) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key written twice in one mapping: PyYAML keeps the last without a word, so a
    route's second `guard:` replaced its first and a second `routes:` dropped every route above it (an outside
    tester's configs passed the check). Keys a merge (`<<: *anchor`) brings in may be overridden, as YAML intends."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                earlier = seen.get(key)
            except TypeError:  # an unhashable key: construct_mapping below says so
                continue
            if earlier is not None:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark,
                    f"the key {key!r} appears twice (first on line {earlier.line + 1}); YAML would keep only the "
                    "last, so write it once", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path | None) -> GatewayConfig:
    """Read a YAML config file (None: the default config); raises ConfigError on a bad file or value."""
    if path is None:
        return default_config()
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as fh:  # a stream with a name: YAML errors point at the file, line and column
            data = yaml.load(fh, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the config as UTF-8") from None
    if data is None:  # an empty file (a wrong path in a template, a failed render) passed as "valid (0 routes)"
        raise ConfigError(f"{path}: the config file is empty; give its upstreams and routes (docs/gateway.md), or "
                          "leave --config out for the built-in offline config")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a YAML mapping, got {type(data).__name__}")
    return parse_config(_paths_beside(data, path.parent.absolute()), source=str(path))


def _paths_beside(data: dict | None, folder: Path) -> dict | None:
    """The config with each relative path it names (the config's and each decision's `calibration:`, `log.path`)
    read from the config file's folder, not from wherever the gateway is started (a service manager starts it
    elsewhere, and the log would land in its folder while the calibration file was found beside the config)."""

    def anchored(value: Any) -> Any:
        if not isinstance(value, str) or not value or value == "packaged" or value.startswith("~"):
            return value
        return value if Path(value).is_absolute() else str(folder / value)

    if not data:
        return data
    data = {**data}
    if "calibration" in data:
        data["calibration"] = anchored(data["calibration"])
    if isinstance(data.get("log"), dict) and "path" in data["log"]:
        data["log"] = {**data["log"], "path": anchored(data["log"]["path"])}
    routes = data.get("routes")
    if isinstance(routes, list):
        data["routes"] = [
            {k: {**v, "calibration": anchored(v["calibration"])} if isinstance(v, dict) and "calibration" in v else v
             for k, v in route.items()} if isinstance(route, dict) else route
            for route in routes
        ]
    return data


DEFAULT_CONFIG_YAML = """\
# jevserve gateway default config: runs offline. The embedded decision model answers in process and, with no
# upstream declared, the built-in placeholder upstream answers (its replies say they are placeholders).
# Operating points are target rates: each guard/harm/clarify threshold is the one that acts on at most 1 % of the
# packaged everyday requests in every shape, the tool gate's the one that blocks at most 5 % of the packaged ordinary
# tool calls, the cache's the one that serves none of the packaged pairs whose answers differ (docs/gateway.md lists
# the thresholds and what they catch).
decider: embedded
decision_timeout_ms: 1000
on_decision_timeout: reject  # an enforced guard or harm without an answer in time: 429 with Retry-After
routes:
  - model: jev-gateway
    description: every decision on, with the placeholder upstream
    guard: {max_false_action_rate: 0.01, action: block, mode: enforce}
    harm: {max_false_action_rate: 0.01, action: block, mode: enforce}
    clarify: {max_false_action_rate: 0.01, mode: shadow}      # a clarifying question instead of an answer: shadow
    cache: {max_false_action_rate: 0, min_similarity: 0.75, ttl_s: 3600, max_entries: 10000} # none of its pairs served
    tool_gate: {max_false_action_rate: 0.05, action: block, mode: enforce}   # of ordinary calls (BFCL, scoped)
    priority: {queue_policy: plf, aging_s: 30}
  - model: jev-gateway-plain
    description: no decisions (a plain proxy), for comparison
"""


def default_config() -> GatewayConfig:
    """The documented default config (DEFAULT_CONFIG_YAML)."""
    return parse_config(yaml.safe_load(DEFAULT_CONFIG_YAML), source="default config")


def windows_in_context_notes(config: GatewayConfig, reads_windows_in_context: bool, decider_name: str) -> list[str]:
    """One line per route whose guard sets `windows_in_context`: that it reads its windows in context, or a warning
    where that changes nothing (a decider that reads each window alone, or `max_windows: 1`)."""
    lines = []
    for i, route in enumerate(config.routes):
        guard = route.guard
        if guard is None or not guard.windows_in_context:
            continue
        where = f"routes[{i}] ({route.model}): guard.windows_in_context"
        if not reads_windows_in_context:
            lines.append(f"warning: {where} changes nothing with decider {decider_name}, which reads each window "
                         "alone; only the tuned reader (`--decider tuned`) reads windows in context")
        elif guard.max_windows == 1:
            lines.append(f"warning: {where} changes nothing with max_windows 1, which cuts no windows")
        else:
            lines.append(f"note: {where}: each window is read from its text's encoder pass (docs/gateway.md says "
                         "what it catches and misses)")
    return lines


_VERSION_SEGMENT = re.compile(r"^v\d+\w*$")  # v1, v1beta, v2: an OpenAI-compatible API's version in its base path


def upstream_url_warnings(config: GatewayConfig) -> list[str]:
    """One line per upstream whose URL names no API version (`/v1`, `/v1beta`) in its path: vLLM, Ollama, llama.cpp and
    the hosted APIs serve under one, and `http://host:8000` sends every request to `/chat/completions`, where such a
    server answers a bare 404 the client reads as the gateway's. A warning, not an error: a server may serve there."""
    lines = []
    for i, upstream in enumerate(config.upstreams):
        if upstream.url == PLACEHOLDER_URL:
            continue
        segments = urllib.parse.urlsplit(upstream.url).path.split("/")
        if not any(_VERSION_SEGMENT.match(segment) for segment in segments):
            lines.append(
                f"warning: upstreams[{i}] ({upstream.name}): url {upstream.url} names no API version, so chat requests "
                f"go to {upstream.url}/chat/completions; OpenAI-compatible servers (vLLM, Ollama, llama.cpp) serve "
                f"under /v1 ({upstream.url}/v1): add it unless your server answers there"
            )
    return lines


def objective_notes(config: GatewayConfig) -> list[str]:
    """One line per route whose `inference.default_objective` names none of its bands' objectives. Not an error: the
    default may be an InferenceObjective of its own (requests without a prediction, or longer than every band); but a
    misspelt one is stamped on each such request, and only the cluster knows whether it exists."""
    lines = []
    for i, route in enumerate(config.routes):
        inference = route.inference
        if inference is None or inference.default_objective is None or not inference.objectives:
            continue
        names = [band.name for band in inference.objectives]
        if inference.default_objective not in names:
            lines.append(f"note: routes[{i}] ({route.model}): inference.default_objective "
                         f"{inference.default_objective!r} is none of its objectives ({', '.join(names)}); it goes on "
                         "every request without a prediction, so it must exist as an InferenceObjective too")
    return lines


def unset_key_warnings(config: GatewayConfig) -> list[str]:
    """One line per upstream whose `api_key_env` names a variable that is unset or empty here: its requests would go
    out with no key and come back 401 from a hosted API."""
    return [
        f"warning: upstreams[{i}] ({u.name}): api_key_env {u.api_key_env} is unset or empty, so requests to it would "
        "carry no key; export it before starting the gateway (which refuses to start without it)"
        for i, u in enumerate(config.upstreams)
        if u.api_key_env and not os.environ.get(u.api_key_env)
    ]
