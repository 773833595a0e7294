"""Operating points: a decision's `max_false_action_rate` → the threshold that acts on at most that share of
ordinary requests (for the tool gate: of ordinary tool calls).

For each decision configured with a rate, every calibration request (calibration.py) is scored as the gateway would
score it (the same decision inputs, the same question, the same aggregation over texts), once per decider: the scores
are cached on disk ($JEVSERVE_CACHE/operating-points, else ~/.cache/jevserve/operating-points), keyed by the
decider's identity, the calibration file's digest, the question and the input bounds that decision reads, so changing
the rate, or a bound another decision reads, needs no rescoring. Scores of the shipped models (the embedded default
and the tuned reader) on the packaged files ship with jevserve (data/operating-points.json, by model name, written by
`jevserve gateway calibrate --decider SPEC --package`, which replaces that model's scores, so a model refitted under
the same name leaves none of its old ones behind): the default config starts without scoring for either. Guard,
harm and clarify are calibrated on the packaged everyday requests, the tool gate on the packaged ordinary tool calls
(each call of a request's reply scored as the gateway's tool gate would ask about it), the cache on the packaged
different-answer pairs (each asked about as the cache asks about its nearest entry); a config's own `calibration`
file serves every decision.

The threshold is the highest of the per-shape thresholds: each shape of the calibration set (bare, behind a system
prompt, with tools, second turn, pasted list, document) is acted on at most at the target rate. With n requests in a
shape the rate can only be met in steps of 1/n (300 requests: 0.33 %).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from jevserve.gateway.calibration import (
    PACKAGED_CACHE_PAIRS,
    PACKAGED_TOOL_CALLS,
    CalibrationSet,
    call_shapes,
    judged_requests,
    load_calibration,
    score_cache_pairs,
    score_requests,
    score_tool_calls,
)
from jevserve.gateway.config import GatewayConfig, PolicyConfig, RouteConfig, default_config
from jevserve.gateway.decider import Decider
from jevserve.gateway.errors import ConfigError
from jevserve.gateway.policies.base import threshold_text
from jevserve.gateway.policies.build import POLICIES
from jevserve.gateway.questions import DEFAULTS
from jevserve.gateway.remote_identities import operating_points_dir
from jevserve.serving.decision_inputs import InputLimits

SCORING_VERSION = 4  # bump when the way a calibration request is scored changes (the cache keys change with it): 4
# since the decision texts read letters written in other forms as plain ones (decision_inputs.plain_forms), exponents
# kept
# the same for a guard that reads its windows in context only, so that the packaged keys stay as they are: 2 since
# calibration asks each window with the text it is read within (scores cached before were of windows read alone)
IN_CONTEXT_SCORING_VERSION = 2
PACKAGED_SCORES = Path(__file__).parent / "data" / "operating-points.json"

Progress = Callable[[str], None]


@functools.cache
def recommended_rate(decision: str) -> float:
    """The rate the documented default config runs a calibrated decision at (named where a config gives none)."""
    policy = getattr(default_config().routes[0], decision, None)
    rate = getattr(policy, "max_false_action_rate", None)
    return 0.01 if rate is None else rate


@dataclass(frozen=True)
class OperatingPoint:
    """One decision's threshold in force, and where it came from."""

    route: str
    decision: str
    threshold: float
    mode: str  # enforce or shadow
    max_false_action_rate: float | None = None  # the target; None: a threshold set by hand
    calibration_rate: float | None = None  # the share of calibration requests at or above the threshold
    rates_by_shape: tuple[tuple[str, float], ...] = ()  # the same, per shape
    num_requests: int = 0  # calibration requests (for the tool gate: calls) scored
    calibration: str | None = None  # which file
    unit: str = "requests"  # what num_requests counts: "requests", "calls" for the tool gate, "pairs" for the cache
    by_default: bool = False  # no operating point was given: the threshold is the default 0.5
    rate_allowed: bool = False  # the decision takes max_false_action_rate (its false actions can be measured)
    num_unjudged: int = 0  # calibration requests it asks nothing about (no user turn, say): left out of the rate
    acted_unlabelled: int = 0  # requests of a decision log that this decision acted on when logged, with no label
    unscored: bool = False  # a hand-set threshold whose calibration scores are in no cache (check without --score)

    def describe(self) -> str:
        """One line: `route/guard  threshold 0.973  (max_false_action_rate 0.01: 0.98 % of 1,626 everyday ...)`."""
        head = f"{self.route}/{self.decision:<8} threshold {threshold_text(self.threshold)} [{self.mode}]"
        if self.max_false_action_rate is None and self.by_default:
            if self.rate_allowed:  # the usual slip: `guard: {}` read as "on, as recommended"
                return (f"{head}  (WARNING: no max_false_action_rate or threshold given, so the fixed default 0.5, "
                        "which bounds nothing: at 0.5 the embedded deciders act on a large share of ordinary "
                        f"requests; give e.g. {self.decision}: {{max_false_action_rate: "
                        f"{recommended_rate(self.decision):g}}})")
            return f"{head}  (the default: no threshold given)"
        if self.max_false_action_rate is None:
            bound = {0.0: "acts on every request it judges", 1.0: "acts only where P is exactly 1"}.get(self.threshold)
            if self.calibration_rate is None:
                unscored = (f"; what it acts on is not scored yet for this decider ({self.num_requests:,} "
                            f"{self.unit} of {self.calibration}): --score scores it" if self.unscored else "")
                return f"{head}  (set by hand{unscored}" + (f"; WARNING: {bound})" if bound else ")")
            # what the hand-set threshold does to ordinary traffic, said as a rate's point says it: a low cache
            # threshold served another question's answer, with nothing in `check` to say so
            worst = max((rate for _, rate in self.rates_by_shape), default=0.0)
            line = (f"{head}  (set by hand: acts on {self.calibration_rate:.2%} of {self.num_requests:,} {self.unit} "
                    f"of {self.calibration}, at most {worst:.2%} in any shape")
            recommended = recommended_rate(self.decision)
            if bound:
                return f"{line}; WARNING: {bound})"
            if max(self.calibration_rate, worst) > recommended:  # a rate bounds every shape, so this is read so too
                return (f"{line}; WARNING: more than the {recommended:g} the documented config runs it at"
                        f"{' in some shape' if self.calibration_rate <= recommended else ''}; "
                        f"give {self.decision}: {{max_false_action_rate: {recommended:g}}} to bound it)")
            return f"{line})"
        if math.isnan(self.threshold):
            return (
                f"{self.route}/{self.decision:<8} max_false_action_rate {self.max_false_action_rate:g} [{self.mode}]: "
                f"not scored yet for this decider ({self.num_requests:,} {self.unit} of {self.calibration} to score)"
            )
        worst = max((rate for _, rate in self.rates_by_shape), default=0.0)
        unjudged = (f"; {self.num_unjudged:,} more had nothing for it to judge (left out)"
                    if self.num_unjudged else "")
        line = (
            f"{head}  (max_false_action_rate {self.max_false_action_rate:g}: acts on {self.calibration_rate:.2%} of "
            f"{self.num_requests:,} {self.unit} of {self.calibration}, at most {worst:.2%} in any shape{unjudged})"
        )
        if self.acted_unlabelled:  # a log used as it stands: what the gateway caught counts as ordinary
            line += (f"  WARNING: {self.acted_unlabelled:,} of these were acted on by {self.decision} when logged and "
                     f"carry no label, so each counts as a false action and raises the threshold above it: label "
                     f'the attacks among them ("labels": {{"{self.decision}": true}}), or leave them out '
                     f'({{"{self.decision}": null}})')
        return line

    def to_dict(self) -> dict:
        """A JSON-ready copy (for /v1/models and reports)."""
        out = dataclasses.asdict(self)
        out["rates_by_shape"] = dict(self.rates_by_shape)
        return out


# The fewest calibration requests (calls, pairs) per shape a rate is set on, whatever the rate: at 0, "none of n
# acted on" bounds the rate at about 3/n (95 %), so below 20 it says next to nothing.
MIN_PER_SHAPE = 20


COARSER_RATES = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)  # what a refused rate is offered instead, nearest first


def requests_needed(rate: float) -> int:
    """Requests per shape a rate needs: enough for it to allow acting on one (1/rate), and at least MIN_PER_SHAPE.
    With fewer the threshold sits just above the shape's top score, wherever that is."""
    return max(MIN_PER_SHAPE, math.ceil(1 / rate - 1e-9)) if rate > 0 else MIN_PER_SHAPE


# Scores are kept (cached, packaged) to this many decimals. A kept score stands for any live score within half a step
# of it, so a threshold set just above the kept score sat below the live one about half the time: the request it was
# set to leave alone was acted on live (an outside tester's calibration file: 2 of 50 of a shape at a rate of 2%).
SCORE_DECIMALS = 7
SCORE_RESOLUTION = 10.0**-SCORE_DECIMALS


def kept_scores(scores: np.ndarray) -> np.ndarray:
    """Scores as they are kept: rounded to SCORE_DECIMALS."""
    return np.round(np.asarray(scores, dtype=np.float64), SCORE_DECIMALS)


def threshold_for_rate(scores: np.ndarray, shapes: np.ndarray, rate: float, *, resolution: float = 0.0) -> float:
    """The lowest threshold at which no shape has more than `rate` of its requests at or above it. With
    `resolution` (scores rounded to that step), above the highest value the rounded score may stand for."""
    threshold = 0.0
    for shape in np.unique(shapes):
        ranked = np.sort(scores[shapes == shape])[::-1]
        allowed = math.floor(rate * len(ranked) + 1e-9)  # requests of this shape that may be acted on
        if allowed < len(ranked):
            # just above the first score that must not be acted on (a threshold above 1 never acts)
            threshold = max(threshold, float(np.nextafter(ranked[allowed] + resolution / 2, np.inf)))
    return threshold


def shares_by_shape(scores: np.ndarray, shapes: np.ndarray, threshold: float) -> tuple[tuple[str, float], ...]:
    """The share of each shape's calibration requests at or above `threshold` (a point's `rates_by_shape`)."""
    return tuple((s, float(np.mean(scores[shapes == s] >= threshold))) for s in sorted(set(shapes.tolist())))


# The InputLimits fields each decision's scores depend on: the guard judges windows of the untrusted texts; the tool
# gate reads the current request and the call's arguments, both bounded; the others read the request text with its
# earlier turns. A key holds only these, so a setting a decision does not read does not rescore it.
_BOUNDS = ("max_text_chars", "head_chars")
LIMITS_READ = {
    "guard": (*_BOUNDS, "min_window_chars", "window_chars", "max_windows", "whole_up_to_chars", "judge_system"),
    "tool_gate": _BOUNDS,
    "cache": _BOUNDS,  # the two conversations' texts, bounded
}
REQUEST_TEXT_LIMITS = (*_BOUNDS, "context_turns", "context_chars")
# harm with `windows: true` also judges the guard's windows of the latest user turn; those fields join its key only
# then, so the keys of harm judged whole (the packaged scores among them) stay what they were
HARM_WINDOW_LIMITS = ("harm_windows", "min_window_chars", "window_chars", "max_windows", "whole_up_to_chars")


def limits_read(policy_key: str, limits: InputLimits) -> dict[str, int | bool]:
    """The fields of `limits` that the decision's calibration scores depend on."""
    names = LIMITS_READ.get(policy_key, REQUEST_TEXT_LIMITS)
    if policy_key == "harm" and limits.harm_windows:
        names = (*names, *HARM_WINDOW_LIMITS)
    if policy_key == "guard" and limits.judge_history:  # only then: the packaged (default) keys stay as they were
        names = (*names, "judge_history")
    if policy_key == "guard" and limits.windows_in_context:  # likewise
        names = (*names, "windows_in_context")
    return {name: getattr(limits, name) for name in names}


def score_key(decider: Decider, policy_key: str, config: PolicyConfig, route: RouteConfig, data: CalibrationSet) -> str:
    """The cache key of one decision's calibration scores (None-free; see the module docstring)."""
    wire = dict(config.question) if config.question else dict(DEFAULTS[POLICIES[policy_key].question_key])
    limits = route.input_limits()
    # a decider that reads each window alone, or a guard that cuts no windows, scores the same either way
    in_context = limits.windows_in_context and decider.reads_windows_in_context and limits.max_windows > 1
    parts = {
        "version": SCORING_VERSION,
        "decider": decider.identity,
        "calibration": data.digest,
        "decision": policy_key,
        "question": wire,
        "limits": limits_read(policy_key, replace(limits, windows_in_context=in_context)),
    }
    if in_context and policy_key == "guard":
        parts["in_context_version"] = IN_CONTEXT_SCORING_VERSION
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


class ScoreCache:
    """Scores by key: the packaged file first, then the disk cache; writes go to the disk cache."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or operating_points_dir()
        self._packaged = {key: scores for by_key in read_packaged().values() for key, scores in by_key.items()}

    def get(self, key: str) -> np.ndarray | None:
        """The cached scores, or None."""
        if key in self._packaged:
            return np.asarray(self._packaged[key], dtype=np.float64)
        path = self.directory / f"{key}.json"
        try:
            return np.asarray(json.loads(path.read_text()), dtype=np.float64)
        except (OSError, ValueError):
            return None

    def put(self, key: str, scores: np.ndarray) -> None:
        """Keep scores on disk (best effort: an unwritable cache only costs rescoring next time)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tmp = self.directory / f"{key}.json.tmp"
            tmp.write_text(json.dumps([float(s) for s in kept_scores(scores)]))
            tmp.replace(self.directory / f"{key}.json")
        except OSError:
            return


def resolve_operating_points(
    config: GatewayConfig,
    decider: Decider,
    *,
    scores: ScoreCache | None = None,
    progress: Progress | None = None,
    score_missing: bool = True,
    rate_hand_thresholds: bool = False,
) -> tuple[GatewayConfig, tuple[OperatingPoint, ...]]:
    """`config` with every rate turned into a threshold, and the operating point of every thresholded decision.

    With `score_missing` off, a rate whose scores are in no cache is left unresolved (its point's threshold is NaN).
    With `rate_hand_thresholds` (`gateway check`), a threshold set by hand on a decision that takes a rate gets the
    share of the calibration file it acts on, where its scores are cached (or scored, with `score_missing`).
    Raises ConfigError when the decider fails while scoring.
    """
    scores = scores if scores is not None else ScoreCache()
    files: dict[str, CalibrationSet] = {}
    routes, points, refused = [], [], []
    for index, route in enumerate(config.routes):
        updates = {}
        for key in POLICIES:
            policy_config = getattr(route, key, None)
            if policy_config is None or not policy_config.enabled or key == "priority":
                continue
            if not policy_config.needs_calibration:
                threshold = policy_config.effective_threshold
                point = OperatingPoint(
                    route.model, key, threshold, policy_config.mode,
                    by_default=policy_config.threshold is None, rate_allowed=policy_config.calibrated,
                )
                if rate_hand_thresholds and policy_config.calibrated and policy_config.threshold is not None:
                    point = _rated_by_hand(point, route, key, policy_config, decider, config, files, scores, progress,
                                           score_missing, where=f"routes[{index}].{key}.threshold")
                points.append(point)
                continue
            data = calibration_for(key, calibration_path(policy_config.calibration, config.calibration), files)
            try:
                point = _calibrate(route, key, policy_config, decider, data, scores, progress, score_missing,
                                   where=rate_setting(index, key))
            except ConfigError as exc:
                if exc.__cause__ is not None:  # the decider failed: it fails the same way for every other rate
                    raise
                refused.append(exc)
                continue
            points.append(point)
            if not math.isnan(point.threshold):
                updates[key] = policy_config.model_copy(update={"threshold": point.threshold})
        routes.append(route.model_copy(update=updates) if updates else route)
    _raise_all(refused)
    return config.model_copy(update={"routes": routes}), tuple(points)


def _rated_by_hand(
    point: OperatingPoint,
    route: RouteConfig,
    key: str,
    policy_config: PolicyConfig,
    decider: Decider,
    config: GatewayConfig,
    files: dict[str, CalibrationSet],
    scores: ScoreCache,
    progress: Progress | None,
    score_missing: bool,
    *,
    where: str,
) -> OperatingPoint:
    """A hand-set threshold's point with the share of its calibration file it acts on, as a rate's point says it;
    the point as it was where the file cannot be read or has nothing to rate it on, or no scores are cached."""
    try:
        data = calibration_for(key, calibration_path(policy_config.calibration, config.calibration), files)
        negatives = data.negatives(key)
        scored = _scores(route, key, policy_config, decider, data, negatives, scores, progress, score_missing,
                         where=where, rate=None) if negatives else None
    except ConfigError as exc:
        if exc.__cause__ is not None:  # the decider failed: said as a rate's scoring says it
            raise
        return point
    if scored is None:
        shapes, unit = _shapes_and_unit(key, negatives) if negatives else (np.array([]), point.unit)
        return dataclasses.replace(point, unscored=bool(negatives), num_requests=len(shapes), unit=unit,
                                   calibration=data.name)
    found, shapes, unit, unjudged = scored
    threshold = point.threshold
    by_shape = shares_by_shape(found, shapes, threshold)
    return dataclasses.replace(
        point, calibration_rate=float(np.mean(found >= threshold)), rates_by_shape=by_shape,
        num_requests=len(shapes), calibration=data.name, unit=unit, num_unjudged=unjudged,
    )


def _raise_all(refused: list[ConfigError]) -> None:
    """Raise one ConfigError saying every refused rate (a config with two wrong rates is mended in one go, not one
    start at a time); nothing when none was refused."""
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise ConfigError(f"{len(refused)} rates cannot be set:\n  " + "\n  ".join(map(str, refused)))


PACKAGED_FOR = {"tool_gate": PACKAGED_TOOL_CALLS, "cache": PACKAGED_CACHE_PAIRS}  # else the packaged everyday file
PACKAGED = "packaged"  # a decision's `calibration:` naming the file jevserve ships for it


def calibration_path(own: str | None, configs: str | None) -> str | None:
    """The calibration file a decision reads: its own, else the config's; None (the packaged file for it) where the
    one that applies says `packaged`, at the top level too (which read it as a file named "packaged")."""
    path = own or configs
    return None if path == PACKAGED else path


def calibration_for(decision: str, path: str | None, loaded: dict[str, CalibrationSet] | None = None) -> CalibrationSet:
    """The calibration file `decision`'s rate is computed on: the config's own, else the packaged one for it."""
    if path is None and decision in PACKAGED_FOR:
        path = str(PACKAGED_FOR[decision])
    loaded = {} if loaded is None else loaded
    key = path or ""
    if key not in loaded:
        loaded[key] = load_calibration(path)
    return loaded[key]


def _calibrate(
    route: RouteConfig,
    key: str,
    policy_config: PolicyConfig,
    decider: Decider,
    data: CalibrationSet,
    cache: ScoreCache,
    progress: Progress | None,
    score_missing: bool,
    *,
    where: str,
) -> OperatingPoint:
    negatives = data.negatives(key)
    calls = key == "tool_gate"  # the tool gate acts on each call of a reply, not on the request
    if calls and not negatives and any(r.tool_calls for r in data.requests):
        raise ConfigError(
            f"{where}: every request with tool_calls in the calibration "
            f"file {data.name} is labelled for tool_gate (true or null), so no call is left as an ordinary one to set "
            "its rate on; add unlabelled ones or give a threshold"
        )
    if calls and not negatives:
        raise ConfigError(
            f"{where}: the calibration file {data.name} holds no request "
            "with tool_calls (the calls your upstream replied with; docs/gateway.md, Operating points); add them, "
            "give the tool gate `calibration: packaged` (jevserve's ordinary calls) or give it a threshold"
        )
    if key == "cache" and not negatives:
        raise ConfigError(
            f"{where}: the calibration file {data.name} holds no cache pair "
            "whose answers differ (records with 'cached' beside 'body'; docs/gateway.md, Operating points); add them, "
            "give the cache `calibration: packaged` (jevserve's blind-written pairs) or give it a threshold"
        )
    if not negatives:  # every request labelled for this decision (known before scoring: `check` says so)
        raise ConfigError(
            f"{where}: all {len(data.requests):,} requests of the "
            f"calibration file {data.name} are labelled for {key} (true or null), so none is left as an ordinary "
            "request to set its rate on; add unlabelled ones or give a threshold"
        )
    scored = _scores(route, key, policy_config, decider, data, negatives, cache, progress, score_missing,
                     where=where, rate=policy_config.max_false_action_rate)
    if scored is None:
        shapes, unit = _shapes_and_unit(key, negatives)
        return OperatingPoint(
            route.model, key, math.nan, policy_config.mode, policy_config.max_false_action_rate,
            num_requests=len(shapes), calibration=data.name, unit=unit, rate_allowed=True,
        )  # fmt: skip
    found, shapes, unit, unjudged = scored
    rate = policy_config.max_false_action_rate
    _require_enough(where, rate, shapes, data, unit)
    threshold = threshold_for_rate(found, shapes, rate, resolution=SCORE_RESOLUTION)
    by_shape = shares_by_shape(found, shapes, threshold)
    return OperatingPoint(
        route=route.model,
        decision=key,
        threshold=threshold,
        mode=policy_config.mode,
        max_false_action_rate=rate,
        calibration_rate=float(np.mean(found >= threshold)),
        rates_by_shape=by_shape,
        num_requests=len(shapes),
        calibration=data.name,
        unit=unit,
        rate_allowed=True,
        acted_unlabelled=data.acted_unlabelled(key),
        num_unjudged=unjudged,
    )


def _scores(
    route: RouteConfig,
    key: str,
    policy_config: PolicyConfig,
    decider: Decider,
    data: CalibrationSet,
    negatives: list,
    cache: ScoreCache,
    progress: Progress | None,
    score_missing: bool,
    *,
    where: str,
    rate: float | None,
) -> tuple[np.ndarray, np.ndarray, str, int] | None:
    """The decision's scores on the calibration file's ordinary requests (calls, pairs), their shapes, the unit and
    how many it judges nothing of (left out): from the caches, else scored (None where `score_missing` is off).
    With a `rate`, too few requests of a shape for it is refused before anything is scored."""
    shapes, unit = _shapes_and_unit(key, negatives)
    cache_key = score_key(decider, key, policy_config, route, data) if decider.identity is not None else None
    found = cache.get(cache_key) if cache_key is not None else None
    if (found is None or len(found) != len(shapes)) and rate is not None:
        # too few requests of a shape is known before anything is scored: `check` says so as start-up would, and
        # start-up says so before a minute of scoring
        counted = _counted_shapes(route, key, policy_config, negatives, shapes, data.name, where)
        _require_enough(where, rate, counted, data, unit)
    if (found is None or len(found) != len(shapes)) and not score_missing:
        return None
    if found is None or len(found) != len(shapes):
        doing = f"scoring {len(shapes):,} calibration {unit} for {route.model}/{key} with {decider.name}"
        if progress is not None:
            progress(doing + (f" ({note})" if (note := other_build_note(decider)) else ""))
        policy = POLICIES[key](policy_config.model_copy(update={"threshold": 0.5}))
        score = {"tool_gate": score_tool_calls, "cache": score_cache_pairs}.get(key, score_requests)
        try:
            found = score(decider, policy, negatives, route.input_limits(), tenths(doing, len(shapes), progress))
        except Exception as exc:  # a decider that cannot answer cannot place a threshold: say so, by name
            # a hand-set threshold (rate None) is only being rated: it stands; what it would act on is not known
            remedy = "make the decider answer, or give a threshold" if rate is not None else \
                "make the decider answer to learn what share of it the threshold acts on (the threshold stands)"
            raise ConfigError(
                f"{where}: scoring the calibration requests with "
                f"{decider.name} failed ({type(exc).__name__}: {exc}); {remedy}"
            ) from exc
        found = kept_scores(found)  # as the cache keeps them: the same threshold whether scored now or read back
        # not under an identity the decider did not answer now: scored while a remote's model had changed, they
        # were kept under the old model's, whose thresholds then came from the new one's scores (an outside tester's)
        if cache_key is not None and decider.identity_confirmed:
            cache.put(cache_key, found)
    unjudged = 0
    # a request the decision asks nothing about is never acted on, and is scored 0.0 (score_requests): only where
    # some score is 0.0 is each request's inputs rebuilt to tell which (start-up reads thousands of cached scores)
    if key not in ("tool_gate", "cache") and (found == 0.0).any():
        policy = POLICIES[key](policy_config.model_copy(update={"threshold": 0.5}))
        judged = judged_requests(policy, negatives, route.input_limits())
        if not judged.any():
            raise nothing_to_judge(where, key, negatives, data.name)
        unjudged = int((~judged).sum())
        found, shapes = found[judged], shapes[judged]
    return found, shapes, unit, unjudged


def nothing_to_judge(where: str, key: str, negatives: list, data_name: str) -> ConfigError:
    """The error for a calibration file none of whose requests gives the decision anything to judge."""
    return ConfigError(
        f"{where}: none of the {len(negatives):,} requests of the "
        f"calibration file {data_name} gives {key} anything to judge (no user turn it reads); check that their "
        "messages are OpenAI chat messages with role 'user' and text content, or give a threshold"
    )


def _counted_shapes(
    route: RouteConfig, key: str, policy_config: PolicyConfig, negatives: list, shapes: np.ndarray, data_name: str,
    where: str,
) -> np.ndarray:
    """The shapes a rate is set on, less those of requests the decision judges nothing of (no decider needed)."""
    if key in ("tool_gate", "cache"):
        return shapes
    policy = POLICIES[key](policy_config.model_copy(update={"threshold": 0.5}))
    judged = judged_requests(policy, negatives, route.input_limits())
    if not judged.any():  # known before anything is scored: `check` says so as start-up does
        raise nothing_to_judge(where, key, negatives, data_name)
    return shapes[judged]


def check_calibration_sizes(config: GatewayConfig) -> None:
    """Raise ConfigError where a calibration file holds too few requests of a shape for its decision's rate: known
    without a decider or scoring, so the gateway can refuse such a config before it binds its port. In the packaged
    files every request has something for each decision to judge, so their shapes are counted as they are (building
    each request's inputs to tell costs a fraction of a second per decision at every start)."""
    refused = []
    for route, key, policy_config, path, data, where in _rated_decisions(config):
        negatives = data.negatives(key)
        if not negatives:
            continue  # said with what to do when the operating points are resolved
        shapes, unit = _shapes_and_unit(key, negatives)
        try:
            counted = shapes if path is None else _counted_shapes(route, key, policy_config, negatives, shapes,
                                                                  data.name, where)
            _require_enough(where, policy_config.max_false_action_rate, counted, data, unit)
        except ConfigError as exc:
            refused.append(exc)
    _raise_all(refused)


def _shapes_and_unit(key: str, negatives: list) -> tuple[np.ndarray, str]:
    """The shape of each thing a decision's rate is set on (each call of a reply for the tool gate), and its name."""
    shapes = call_shapes(negatives) if key == "tool_gate" else np.array([r.shape for r in negatives])
    return shapes, {"tool_gate": "calls", "cache": "pairs"}.get(key, "requests")


def rate_setting(index: int, key: str) -> str:
    """Where a decision's rate is set, named as the config's other errors name a setting (`routes[0].guard.
    max_false_action_rate`)."""
    return f"routes[{index}].{key}.max_false_action_rate"


def _rated_decisions(config: GatewayConfig):
    """(route, decision, its config, its calibration path (None: packaged), the calibration set, where its rate is
    set) of every decision whose operating point is a rate still to resolve; each file read once."""
    files: dict[str, CalibrationSet] = {}
    for index, route in enumerate(config.routes):
        for key in POLICIES:
            policy_config = getattr(route, key, None)
            if policy_config is None or not policy_config.enabled or not policy_config.needs_calibration:
                continue
            path = calibration_path(policy_config.calibration, config.calibration)
            yield route, key, policy_config, path, calibration_for(key, path, files), rate_setting(index, key)


def _require_enough(where: str, rate: float, shapes: np.ndarray, data: CalibrationSet, unit: str) -> None:
    """Raise ConfigError when a shape holds fewer requests than `rate` needs (`requests_needed`): its threshold would
    sit just above the few ordinary requests it has, wherever they happen to score."""
    counts = {str(s): int(n) for s, n in zip(*np.unique(shapes, return_counts=True), strict=True)}
    needed = requests_needed(rate)
    thin = [(s, n) for s, n in sorted(counts.items()) if n < needed]
    if thin:
        listed = ", ".join(f"{s!r} has {n:,}" for s, n in thin)
        fewest = min(counts.values())
        # the advice fits the file: the nearest coarser rate it can set, and no "add requests" to a packaged file
        coarser = next((r for r in COARSER_RATES if r > rate and requests_needed(r) <= fewest), None)
        fixes = ["give your own calibration file (`calibration:`)"] if data.name.startswith("packaged") else (
            [f"add {unit}"] + (["give shapes that are alike one shape"] if len(counts) > 1 else []))
        if coarser is not None:
            fixes.append(f"ask for {coarser:g} (it needs {requests_needed(coarser)} per shape)")
        raise ConfigError(
            f"{where}: {rate:g} cannot be set on {data.name}: it takes at "
            f"least {needed:,} {unit} per shape, and {listed}; with fewer, the threshold lands just above the few it "
            f"has, however low, and acts on most traffic. {', '.join(fixes)[:1].upper()}{', '.join(fixes)[1:]}, or "
            "give a threshold"
        )


def tenths(doing: str, total: int, progress: Progress | None) -> Callable[[int], None] | None:
    """A `done(n)` callback that tells `progress` "DOING: 30% (488/1,626)" each time another tenth is scored (a
    minute-long scoring says how far it is, in at most ten lines)."""
    if progress is None or total <= 0:
        return None
    told = 0

    def done(count: int) -> None:
        nonlocal told
        tenth = 10 * count // total
        if tenth > told:
            told = tenth
            progress(f"{doing}: {10 * tenth}% ({count:,}/{total:,})")

    return done


def other_build_note(decider: Decider, path: Path = PACKAGED_SCORES) -> str | None:
    """Why a shipped model's packaged scores did not serve, when they exist under its name: they were made with its
    encoder graph as constraints.txt's releases build it, and another release of one of them is installed here (an
    outside tester's fresh install scored for twenty minutes without a word of why)."""
    packaged = read_packaged(path).get(decider.name)
    if not packaged or decider.identity is None:
        return None
    default_keys = {score_key(decider, key, policy_config, route, data)
                    for route, key, policy_config, _, data, _ in _rated_decisions(default_config())}
    if default_keys & set(packaged):  # this build's: the config's own questions, bounds or files are what differ
        return None
    return (f"jevserve's packaged scores for {decider.name} match the encoder graph that the releases in "
            "constraints.txt build (torch, transformers, onnx, onnxruntime); another release of one of them is "
            "installed here, so its answers, and its scores, differ a little (`make install` pins them)")


def read_packaged(path: Path = PACKAGED_SCORES) -> dict[str, dict[str, list[float]]]:
    """The packaged scores: model name → score key → one score per calibration request (or call)."""
    if not path.is_file():
        return {}
    return json.loads(path.read_text())["models"]


def write_packaged(
    config: GatewayConfig, decider: Decider, cache: ScoreCache, path: Path = PACKAGED_SCORES
) -> list[str]:
    """Put the cached scores of `config`'s rate-based decisions for `decider` into the packaged file in place of any
    scores packaged under its name before; their keys."""
    scores: dict[str, list[float]] = {}
    for route, key, policy_config, _, data, _ in _rated_decisions(config):
        score_id = score_key(decider, key, policy_config, route, data)
        found = cache.get(score_id)
        if found is None:
            raise ValueError(f"{route.model}/{key}: no scores cached for {decider.name}; score them first")
        scores[score_id] = [float(s) for s in kept_scores(found)]
    models = read_packaged(path) | {decider.name: scores}
    path.write_text(json.dumps({"models": models}, sort_keys=True, separators=(",", ":")) + "\n")
    return list(scores)
