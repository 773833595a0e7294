"""`jevserve gateway replay LOG`: re-decide logged requests with another decider or config, and say what changes.

The log is replayed in order through `run_decisions`, with a cache rebuilt as the gateway built it: after a request
whose reply the gateway stored (the log's `stored`), an entry with the same keys is stored, so a repeat that was a
cache hit is a hit again. Replaying with the same config and decider therefore reports no change. A request that
was served from the cache and is forwarded in the replay is taken to have had a storable reply; one the client
sent with `Cache-Control: no-cache` (the log's `cache_control`) is not looked up, as the gateway did not. The cache's
clock is the log's: each request is looked up and stored at its logged `time`, and entries expire after the route's
`ttl_s` of it (to within a request's duration, as the log's time is taken when the request ends), so a repeat that
was a miss because its entry had expired is a miss again, and a changed `ttl_s` shows what it changes. The tool
calls a logged reply made (`tool_calls`) are gated again as the route's tool gate would gate them; a request's
tool-gate outcome is its strongest: block (or flag) when any call is, at the highest probability among its calls.

A request refused before any decision ran (before routing, or by the route's rate limit) has nothing to compare
and is skipped, counted apart.

An interrupt (Ctrl-C) stops the replay between two requests: what was replayed so far comes back as a partial
`Replay` (`interrupted`), so a long replay's finished part is reported and written, never lost.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jevserve.gateway.cache import Embed, NoLookup, SemanticCache
from jevserve.gateway.cache_keys import wants_a_fresh_reply
from jevserve.gateway.config import GatewayConfig, RouteConfig
from jevserve.gateway.decider import Decider, DecisionUnavailable
from jevserve.gateway.decisions import resolve_route, run_decisions
from jevserve.gateway.errors import UnknownModelError
from jevserve.gateway.operating_points import OperatingPoint, resolve_operating_points
from jevserve.gateway.policies.base import comparison
from jevserve.gateway.policies.tool_gate import ToolGate
from jevserve.json_report import jsonl_lines

Outcome = tuple[str, float | None]  # (action, probability)
REFUSED_MODEL = "(unknown)"  # a logged request's model when it was refused before a route was found (context.py)


class LogError(ValueError):
    """A decision log that cannot be replayed: missing, empty, or with a line that is not a gateway record."""


class DeciderError(ValueError):
    """The decider the config (or --decider) names cannot be made: an unknown spec, an unset key variable."""


@dataclass(frozen=True)
class ReplayedRequest:
    """One logged request, its logged verdicts and its replayed ones."""

    request_id: str
    excerpt: str  # the start of the latest user request
    old: dict[str, Outcome]  # decision → logged (action, probability)
    new: dict[str, Outcome]  # decision → replayed (action, probability)
    # decision → True (should act), False (should not) or None (neither: left out of its columns), when logged
    labels: dict[str, bool | None] = field(default_factory=dict)
    decision_ms: float = 0.0
    # decision → (logged threshold, replayed threshold): two deciders' probabilities are compared with their own
    # thresholds, so "allow (0.964) → block (0.933)" reads as a contradiction unless the lines show them
    thresholds: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def changed(self) -> list[str]:
        """The decisions whose action differs, except a decision the config added or removed where it did nothing
        the client sees (allow, skip, a queue priority ↔ not run; `Replay.added_or_removed` names such decisions).
        Counted, a removed clarify or priority listed every request as changed and hid those whose guard or cache
        did change; a block that is gone, or new, is a change."""
        return [d for d in sorted(set(self.old) | set(self.new))
                if is_change(_action(self.old, d), _action(self.new, d))]


# a decision not run ("-") and the actions that change nothing the client receives
_UNSEEN = frozenset({"-", "allow", "skip", "prioritise"})
SHADOW = "~shadow"  # marks an action taken in shadow mode (logged, not carried out), as the decisions header does


def _shown(action: str, mode: Any) -> str:
    """The action as the replay lists it: `block~shadow` when it was only logged."""
    return f"{action}{SHADOW}" if str(mode) == "shadow" and action not in ("allow", "skip") else action


def is_change(before: str, after: str) -> bool:
    """Whether the client would see a difference: an action in shadow mode is seen as none (a shadow block that
    is enforced now is a change, one in shadow on both sides is not)."""
    seen_before, seen_after = (a if not a.endswith(SHADOW) else "allow" for a in (before, after))
    return seen_before != seen_after and not {seen_before, seen_after} <= _UNSEEN


def _action(outcomes: dict[str, Outcome], decision: str) -> str:
    return outcomes[decision][0] if decision in outcomes else "-"


@dataclass(frozen=True)
class Replay:
    """A whole replay."""

    decider: str
    requests: tuple[ReplayedRequest, ...]
    num_skipped: int  # records whose model the config does not serve
    points: tuple[OperatingPoint, ...]
    skipped_models: dict[str, int] = field(default_factory=dict)  # a skipped record's model → records (not 404s)
    num_refused: int = 0  # skipped records the gateway refused before routing (logged as model "(unknown)")
    num_undecided: int = 0  # skipped records refused after routing but before any decision ran (a rate limit)
    interrupted: bool = False  # stopped early (Ctrl-C): only the first records were replayed
    num_logged: int = 0  # the records the replay was given (the log's, or the first --limit)

    @property
    def num_seen(self) -> int:
        """The records gone through: replayed or skipped (all of them unless interrupted)."""
        return len(self.requests) + self.num_skipped

    def added_or_removed(self) -> dict[str, str]:
        """decision → "added" or "removed": the decisions that ran only in the replay, or only as logged."""
        out: dict[str, str] = {}
        for r in self.requests:
            for d in set(r.new) - set(r.old):
                out.setdefault(d, "added")
            for d in set(r.old) - set(r.new):
                out.setdefault(d, "removed")
        return dict(sorted(out.items()))

    def transitions(self) -> dict[str, Counter]:
        """decision → Counter of "old→new" actions."""
        out: dict[str, Counter] = {}
        for r in self.requests:
            for d in sorted(set(r.old) | set(r.new)):
                out.setdefault(d, Counter())[f"{_action(r.old, d)}→{_action(r.new, d)}"] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary with every changed request."""
        return {
            "decider": self.decider,
            "partial": self.interrupted,  # interrupted: only the first num_records of num_logged gone through
            "num_records": self.num_seen,
            "num_logged": max(self.num_logged, self.num_seen),
            "num_skipped": self.num_skipped,
            "skipped_models": dict(self.skipped_models),
            "operating_points": [p.to_dict() for p in self.points],
            "transitions": {d: dict(c.most_common()) for d, c in self.transitions().items()},
            "added_or_removed": self.added_or_removed(),
            "changed": [
                {"request_id": r.request_id, "excerpt": r.excerpt, "old": r.old, "new": r.new, "changed": r.changed(),
                 "thresholds": {d: list(pair) for d, pair in sorted(r.thresholds.items()) if d in r.changed()}}
                for r in self.requests
                if r.changed()
            ],
        }


def read_log_strict(path: str | Path, *, allow_empty: bool = False) -> list[dict[str, Any]]:
    """Every record of a decision log; raises LogError for a missing file, any line that is not one, and (unless
    `allow_empty`) a file with no record (empty, or blank lines only)."""
    path = Path(path)
    try:
        lines = jsonl_lines(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise LogError(f"{path}: cannot read the log ({exc})") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and records:
                # the last line, cut where a crash or a full disk stopped the writer (it has no line end): its
                # request is lost, the others are not (the whole log was refused)
                print(f"note: {path} line {number}: cut short (no line end), so left out; the {len(records)} "
                      "record(s) above it are replayed", file=sys.stderr)
                break
            raise LogError(f"{path} line {number}: not JSON ({exc.msg}); is it a gateway decision log?") from None
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise LogError(f"{path} line {number}: not a gateway decision record (no 'messages' list)")
        records.append(record)
    if not records and not allow_empty:
        raise LogError(f"{path}: the log holds no records")
    return records


def _logged(record: dict[str, Any]) -> dict[str, Outcome]:
    verdicts = (record.get("decisions") or {}).get("verdicts") or []
    return {v["decision"]: (_shown(v["action"], v.get("mode")), v.get("probability"))
            for v in verdicts if isinstance(v, dict)}


def _thresholds(record: dict[str, Any], replayed: Sequence[Any]) -> dict[str, tuple[float | None, float | None]]:
    logged = (record.get("decisions") or {}).get("verdicts") or []
    old = {v["decision"]: v.get("threshold") for v in logged if isinstance(v, dict) and "decision" in v}
    new = {v.decision: v.threshold for v in replayed}
    return {d: (old.get(d), new.get(d)) for d in set(old) | set(new)}


def _strongest(verdicts: Sequence[dict[str, Any]]) -> Outcome:
    """A request's tool-gate outcome from its calls' verdicts: the first acting action, else allow; the highest P."""
    acting = [_shown(v["action"], v.get("mode")) for v in verdicts if v.get("action") not in ("allow", "skip")]
    found = [v["probability"] for v in verdicts if v.get("probability") is not None]
    return (acting[0] if acting else "allow", max(found) if found else None)


async def _regate(
    decider: Decider, route: RouteConfig, user_text: str, calls: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The tool gate's verdicts on `calls` under `route`'s gate (its fallback when the decider cannot answer)."""
    gate = ToolGate(route.tool_gate)
    try:
        answers = await decider.decide(gate.asks_for_calls(user_text, calls, route.input_limits()))
    except DecisionUnavailable:
        answers = None
    return [v.to_dict() for v in gate.act_on_calls(calls, answers)]


def _gate_threshold(verdicts: Sequence[dict[str, Any]]) -> float | None:
    return next((v["threshold"] for v in verdicts if v.get("threshold") is not None), None)


def _was_stored(record: dict[str, Any]) -> bool:
    if "stored" in record:
        return bool(record["stored"])
    # logs written before `stored` was recorded: a forwarded 200 with no stream error
    final = [a for a, _ in _logged(record).values() if a in ("block", "clarify", "serve_cached")]
    return record.get("status") == 200 and not final and "stream_error" not in (record.get("upstream") or {})


async def replay_records(
    records: Sequence[dict[str, Any]], config: GatewayConfig, decider: Decider, *, embed: Embed | None = None
) -> Replay:
    """Re-decide `records` in order (see the module docstring)."""
    config, points = resolve_operating_points(config, decider)
    cache = None
    if any(r.cache is not None and r.cache.enabled for r in config.routes):
        from jevserve.gateway.cache import embedded_embed

        cache = SemanticCache(embed or embedded_embed(), clock=lambda: logged_at)
    logged_at = 0.0  # the replay's clock: the logged time of the request being replayed (the last one logged)
    replayed, num_skipped, num_refused, num_undecided = [], 0, 0, 0
    skipped_models: Counter = Counter()
    interrupted = False
    try:
        for record in records:
            when = record.get("time")
            if isinstance(when, int | float) and not isinstance(when, bool) and math.isfinite(when):
                logged_at = max(logged_at, float(when))  # a log's times only go forward
            tenant = str(record.get("tenant") or "default")
            try:
                route = resolve_route(config, record.get("model"))
            except UnknownModelError:
                num_skipped += 1
                if record.get("model") == REFUSED_MODEL:
                    num_refused += 1  # refused before routing (an unknown model, a bad body): nothing was decided
                else:
                    skipped_models[str(record.get("model"))] += 1
                continue
            if "decisions" in record and record["decisions"] is None:  # logged as refused before deciding
                num_skipped += 1
                num_undecided += 1
                continue
            fresh = wants_a_fresh_reply(record.get("cache_control") or (), record.get("params") or {})
            lookup = NoLookup() if cache is not None and fresh else cache
            report = await run_decisions(
                record["messages"], config=route, decider=decider, tools=record.get("tools"), cache=lookup,
                tenant=tenant, params=record.get("params") or {"model": record.get("model")},
            )  # fmt: skip
            new = {v.decision: (_shown(str(v.action), v.mode), v.probability) for v in report.verdicts}
            old = _logged(record)
            thresholds = _thresholds(record, report.verdicts)
            calls = [c for c in record.get("tool_calls") or () if isinstance(c, dict)]
            # the reply's calls are gated only when the request reaches the upstream: one the new config refuses (or
            # answers from the cache) first has no reply to gate
            has_gate = route.tool_gate is not None and route.tool_gate.enabled and report.inputs is not None
            if calls and has_gate and report.final is None:
                regated = await _regate(decider, route, report.inputs.user_text, calls)
                new["tool_gate"] = _strongest(regated)
                thresholds["tool_gate"] = (None, _gate_threshold(regated))
            elif calls and has_gate:  # skipped, as a decision another verdict answered first is: not removed
                new["tool_gate"] = ("skip", None)
            if calls and record.get("tool_gate"):
                gated_then = [v for v in record["tool_gate"] if isinstance(v, dict)]
                old["tool_gate"] = _strongest(gated_then)
                thresholds["tool_gate"] = (_gate_threshold(gated_then), thresholds.get("tool_gate", (None, None))[1])
            had_reply = _was_stored(record) or old.get("cache", ("",))[0] == "serve_cached"
            if cache is not None and report.cache_keys is not None and report.final is None and had_reply:
                inputs = report.inputs
                text = inputs.cache_text if inputs is not None and inputs.cache_complete else None
                await cache.put(tenant, text, {"replayed": True}, ttl_s=route.cache.ttl_s,
                                max_entries=route.cache.max_entries, vector=report.cache_vector,
                                keys=report.cache_keys)  # fmt: skip
            excerpt = " ".join((report.inputs.user_text if report.inputs else "").split())[:80]
            given = record.get("labels")
            labels = {k: None if v is None else bool(v) for k, v in given.items()} if isinstance(given, dict) else {}
            replayed.append(
                ReplayedRequest(str(record.get("request_id", "?")), excerpt, old, new, labels, report.decision_ms,
                                thresholds)
            )
    except (asyncio.CancelledError, KeyboardInterrupt):
        # Ctrl-C: asyncio.run cancels this task; what was replayed is returned as a partial replay (the request being
        # re-decided when the interrupt came is left out)
        interrupted = True
    finally:
        if cache is not None:
            cache.close()
    return Replay(
        decider.name, tuple(replayed), num_skipped, points, skipped_models=dict(skipped_models.most_common()),
        num_refused=num_refused, num_undecided=num_undecided, interrupted=interrupted, num_logged=len(records),
    )  # fmt: skip


def read_logs(paths: Sequence[str | Path]) -> list[dict[str, Any]]:
    """The records of one decision log, or of several merged by the time each line was written: replicas that
    share a store (one cache) each log only their own requests, and a hit in one replica's log was stored by a
    request in another's, so replaying one of them alone reports the hits as changes."""
    if len(paths) == 1:
        return read_log_strict(paths[0])
    seen: dict[Path, str | Path] = {}
    for path in paths:
        if (same := Path(path).resolve()) in seen:  # its requests would be replayed twice, each a false change
            raise LogError(f"{path}: given twice (as {seen[same]}); give each replica's log once")
        seen[same] = path
    # a replica that served nothing has an empty log: with the others, it adds nothing rather than stopping the replay
    logs = [read_log_strict(path, allow_empty=True) for path in paths]
    if not any(logs):
        raise LogError(f"{', '.join(map(str, paths))}: the logs hold no records")
    first_seen: dict[tuple[Any, float], tuple[str | Path, int]] = {}
    for path, records in zip(paths, logs, strict=True):
        for number, record in enumerate(records, 1):
            if not isinstance(record.get("time"), (int, float)):
                raise LogError(f"{path} record {number}: no 'time', so it cannot be merged with the other logs")
            # one request logged at one instant in two logs is a copy of a log under another name, whose requests
            # would be replayed twice (the path check above cannot see it)
            key = (record.get("request_id"), record["time"])
            if key[0] is not None and (earlier := first_seen.get(key)) is not None and earlier[0] is not path:
                raise LogError(f"{path} record {number} is {earlier[0]} record {earlier[1]} (request "
                               f"{key[0]!r}, same time): one log given twice under two names? give each once")
            first_seen.setdefault(key, (path, number))
    return sorted(itertools.chain.from_iterable(logs), key=lambda record: record["time"])  # stable: ties keep order


def replay_log(
    paths: str | Path | Sequence[str | Path], config: GatewayConfig, *, limit: int | None = None,
    decider: Decider | None = None, embed: Embed | None = None,
) -> Replay:  # fmt: skip
    """Re-decide the first `limit` records of the log at `paths`, or of several logs merged by time (`read_logs`);
    raises LogError for a log that cannot be read."""
    from jevserve.decide.registry import UnknownSpecError
    from jevserve.gateway.decider import decider_for

    records = read_logs([paths] if isinstance(paths, (str, Path)) else paths)[:limit]
    try:
        decider = decider or decider_for(config)
    except (UnknownSpecError, ValueError) as exc:
        raise DeciderError(str(exc)) from None

    async def run() -> Replay:
        try:
            return await replay_records(records, config, decider, embed=embed)
        finally:
            await decider.aclose()

    return asyncio.run(run())


def format_report(replay: Replay, *, max_listed: int = 50) -> str:
    """A plain-text report: operating points, transitions per decision, and each changed request."""
    num = len(replay.requests)
    if replay.interrupted:
        head = (
            f"interrupted: replayed {num} of the first {replay.num_seen} of {replay.num_logged} logged requests with "
            f"{replay.decider} (a partial replay"
        )
    else:
        head = f"replayed {num} of {replay.num_seen} logged requests with {replay.decider} ("
    lines = [
        head + f"{'; ' if replay.interrupted else ''}{replay.num_skipped} skipped: {describe_skipped(replay)})",
        *(f"  {p.describe()}" for p in replay.points),
        f"{'decision':<10} {'changed':>8} {'of':>6}   transitions (logged→replayed)",
    ]
    for decision, counts in sorted(replay.transitions().items()):
        # counted as the request list below counts them: a move between actions the client never sees is no change
        changed = sum(n for t, n in counts.items() if is_change(*t.split("→")))
        moves = ", ".join(f"{t} ×{n}" for t, n in counts.most_common())
        lines.append(f"{decision:<10} {changed:>8} {sum(counts.values()):>6}   {moves}")
    moved = replay.added_or_removed()
    if moved:
        lines.append("decisions the config " + "; ".join(
            f"{how} ({', '.join(d for d, h in moved.items() if h == how)})" for how in ("added", "removed")
            if how in moved.values()) + ": in the table above, not counted as a request's change below")
    changed = [r for r in replay.requests if r.changed()]
    lines.append(f"{len(changed)} request(s) changed" + (":" if changed else ""))
    for r in changed[:max_listed]:
        moves = "; ".join(f"{d} {_show(r.old, d, r.thresholds.get(d, (None, None))[0])} → "
                          f"{_show(r.new, d, r.thresholds.get(d, (None, None))[1])}" for d in r.changed())
        lines.append(f"  {r.request_id}  {r.excerpt!r}  {moves}")
    if len(changed) > max_listed:
        lines.append(f"  ... and {len(changed) - max_listed} more (--json lists them all)")
    return "\n".join(lines)


def describe_skipped(replay: Replay) -> str:
    """Why records were skipped: the models no route of the config serves, and the requests refused before routing."""
    parts = []
    if replay.skipped_models:
        models = ", ".join(f"{m!r} ×{n}" for m, n in replay.skipped_models.items())
        parts.append(f"no route of the config serves their model: {models}")
    if replay.num_refused:
        parts.append(f"{replay.num_refused} refused before routing, as logged")
    if replay.num_undecided:
        parts.append(f"{replay.num_undecided} refused before their decisions ran (a rate limit, or a request no "
                     "decision reads, such as a prompt of token ids), as logged")
    return "; ".join(parts) or "none"


def _show(outcomes: dict[str, Outcome], decision: str, threshold: float | None = None) -> str:
    """`block (0.933 ≥ 0.920)`: the action, and its probability beside the threshold it was compared with."""
    if decision not in outcomes:
        return "-"
    action, p = outcomes[decision]
    if p is None or action == "skip":  # skipped: another verdict answered first, so its probability decided nothing
        return action
    return f"{action} ({comparison(p, threshold) if threshold is not None else f'{p:.3f}'})"
