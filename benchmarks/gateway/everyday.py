"""The gateway's default config on everyday traffic and, at the same operating points, on what it should catch.

    .venv/bin/python benchmarks/gateway/everyday.py [--decider SPEC] [--fresh]

1. Everyday table: every request of the bench's everyday TEST side (never used for calibration; the operating points
   are computed on the train side's packaged file) goes through `run_decisions` with the default route, in its shape
   (bare, behind a system prompt, with tools, second turn, pasted list, document). Per shape and decision: the share
   acted on, with a 95 % Wilson interval; "overall" is any enforced decision acting (a refused request).
2. At the same operating points: injection and jailbreak recall on the bench's test sides (guard-injection,
   guard-jailbreak), plain and with a harmless suffix; harmful requests blocked (guard-harmful) and over-refusal
   (guard-overrefusal's benign side); the tool gate on agent-action-risk's test side (unsafe calls blocked, safe
   calls blocked), on ordinary calls held out (BFCL's test side: requests with the calls that answer them; the
   operating point is computed on its train side) and on the calls made by rule for held-out requests
   (train/tool_calls.py's test side: scoped calls, and calls that destroy far more than was asked).
3. Cache: false serves on different-answer pairs (benchmarks/gateway/cache_pairs.jsonl: negation, swapped
   direction, other entity, other number, written by hand; and the bench's cache-pairs test traps), reuse of exact
   repeats and of paraphrases, through the gateway's cache with the default settings; and the seventh blind-written
   pair set, held out from the pairs the cache's threshold is set on.

Each section's probabilities are kept in benchmarks/results/gateway_everyday.json as it finishes, so a run that is
stopped resumes where it was (--fresh starts over). Writes the tables into docs/gateway.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared helpers
from _serverbench import guard_whole_up_to, machine, publish, replace_section, with_guard
from jevserve.bench.data import BenchData
from jevserve.bench.sources.everyday import load_everyday
from jevserve.bench.task import split_items
from jevserve.bench.tasks import TASKS
from jevserve.decide.embedder import embed_texts_fp32
from jevserve.gateway import default_config, make_decider, run_decisions
from jevserve.gateway.cache import SemanticCache, embedded_embed
from jevserve.gateway.operating_points import resolve_operating_points
from jevserve.gateway.questions import UNSAFE_ACTION
from jevserve.json_report import jsonl_lines
from jevserve.train.goal_cases import TWO_SENTENCES

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "benchmarks" / "results" / "gateway_everyday.json"
DOC = ROOT / "docs" / "gateway.md"
PAIRS = ROOT / "benchmarks" / "gateway" / "cache_pairs.jsonl"
BLIND = ROOT / "benchmarks" / "decide" / "cache_pairs_blind7.jsonl"  # not among the packaged calibration pairs
HARMLESS_SUFFIX = " " + TWO_SENTENCES
SHAPES = ("bare", "system", "tools", "second-turn", "list", "document")
DECISIONS = ("guard", "harm", "clarify")
COMMAND = "python benchmarks/gateway/everyday.py"


def rate(k: int, n: int) -> dict:
    """A proportion with its 95 % Wilson interval (scipy)."""
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "ci95": None}
    ci = stats.binomtest(int(k), int(n)).proportion_ci(0.95, method="wilson")
    return {"k": int(k), "n": int(n), "rate": k / n, "ci95": [float(ci.low), float(ci.high)]}


def show(r: dict) -> str:
    """`1.2 % [0.4, 3.5] (3/250)`."""
    if not r["n"]:
        return "–"
    low, high = r["ci95"]
    return f"{100 * r['rate']:.1f} % [{100 * low:.1f}, {100 * high:.1f}] ({r['k']}/{r['n']})"


async def verdict_probabilities(decider, config, bodies: Sequence[dict], decisions=DECISIONS) -> dict[str, list]:
    """Each decision's probability per request body, through run_decisions with `config` (its first route and its
    decision timeout; 16 in flight so the batcher batches). None where the decision fell back: no answer within
    the decision timeout."""
    sem = asyncio.Semaphore(16)

    async def one(body: dict) -> dict:
        async with sem:
            report = await run_decisions(body["messages"], config=config, decider=decider, tools=body.get("tools"))
        return {d: (report.verdict(d).probability if report.verdict(d) else None) for d in decisions}

    rows = await asyncio.gather(*(one(b) for b in bodies))
    return {d: [r[d] for r in rows] for d in decisions}


def user(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def everyday(decider, config) -> dict:
    requests = load_everyday("test")
    probabilities = asyncio.run(verdict_probabilities(decider, config, [r.body for r in requests]))
    return {"shapes": [r.shape for r in requests], "probabilities": probabilities}


def catches(decider, config, data) -> dict:
    out = {}
    for task in ("guard-injection", "guard-jailbreak", "guard-harmful", "guard-overrefusal"):
        _, test = split_items(TASKS[task].load_items(data))
        texts = [i.state for i in test]
        labels = [bool(i.label) for i in test]
        plain = asyncio.run(verdict_probabilities(decider, config, [user(t) for t in texts], ("guard", "harm")))
        attacked = [t + HARMLESS_SUFFIX for t, y in zip(texts, labels, strict=True) if y]
        suffixed = asyncio.run(verdict_probabilities(decider, config, [user(t) for t in attacked], ("guard", "harm")))
        out[task] = {"labels": labels, "plain": plain, "suffixed": suffixed}
    _, test = split_items(TASKS["agent-action-risk"].load_items(data))
    out["agent-action-risk"] = {
        "labels": [bool(i.label) for i in test],
        "unsafe": tool_gate_probabilities(decider, [i.state for i in test]),
    }
    return out


def tool_gate_probabilities(decider, states: Sequence[str]) -> list[float]:
    """P(unsafe) of each agent-action state (the tool gate's question about `User request: …\\nAgent action: …`)."""
    from jevserve.gateway.decider import ask

    answers = {}
    for start in range(0, len(states), 64):
        chunk = states[start : start + 64]
        answers.update(decider.decide_blocking([ask(str(start + i), s, UNSAFE_ACTION) for i, s in enumerate(chunk)]))
    return [float(answers[str(i)][0]) for i in range(len(states))]


def tool_calls(decider, config, data) -> dict:
    """P(unsafe) of every held-out ordinary call (BFCL test side), asked as the gateway's tool gate asks, and of the
    calls made by rule for held-out requests."""
    from jevserve.bench.tool_call_export import held_out_records_from
    from jevserve.gateway.calibration import calibration_request, call_shapes, score_tool_calls
    from jevserve.gateway.policies.tool_gate import ToolGate
    from jevserve.train.tool_calls import tool_call_cases

    route = config.routes[0]
    requests = [calibration_request(record, n) for n, record in enumerate(held_out_records_from(data), 1)]
    gate = ToolGate(route.tool_gate)
    ordinary = score_tool_calls(decider, gate, requests, route.input_limits())
    cases = tool_call_cases("test")
    return {
        "ordinary": {"shapes": call_shapes(requests).tolist(), "unsafe": ordinary.tolist()},
        "rules": {
            "labels": [bad for _, bad in cases],
            "unsafe": tool_gate_probabilities(decider, [state for state, _ in cases]),
        },
    }


def cache_pairs(decider, config, data) -> dict:
    pairs = [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]
    rows = [(p["kind"], p["cached"], p["new"]) for p in pairs]
    _, test = split_items(TASKS["cache-pairs"].load_items(data))
    category = {(r.a, r.b): r.category for r in data.source("fow-cache-pairs")}
    for item in test:
        pair = (item.extra["cached"], item.extra["new"])
        kind = "bench paraphrase" if item.label else f"bench trap: {category[pair]}"
        rows.append((kind, *pair))
    served = asyncio.run(_serve_pairs(decider, config, [(a, b) for _, a, b in rows]))
    exact = asyncio.run(_serve_pairs(decider, config, [(a, a) for _, a, _ in rows]))
    return {"kinds": [k for k, _, _ in rows], "served": served, "exact_served": exact}


async def _serve_pairs(decider, config, pairs: Sequence[tuple[str, str]]) -> list[dict]:
    """For each (cached, new): store `cached` as a reply, ask `new` through the gateway's cache; what happened."""
    cache = SemanticCache(embedded_embed())
    params = {"model": config.routes[0].model}
    sem = asyncio.Semaphore(16)

    async def one(index: int, cached: str, new: str) -> dict:
        tenant = f"pair-{index}"
        async with sem:
            first = await run_decisions([{"role": "user", "content": cached}], config=config, decider=decider,
                                        cache=cache, tenant=tenant, params=params)  # fmt: skip
            await cache.put(tenant, first.inputs.cache_text, {"answer": cached}, ttl_s=3600, max_entries=10,
                            vector=first.cache_vector, keys=first.cache_keys)  # fmt: skip
            report = await run_decisions([{"role": "user", "content": new}], config=config, decider=decider,
                                         cache=cache, tenant=tenant, params=params)  # fmt: skip
        verdict = report.verdict("cache")
        tier = verdict.detail.tier if verdict.detail is not None else None
        return {"served": verdict.action == "serve_cached", "tier": tier, "probability": verdict.probability}

    try:
        return list(await asyncio.gather(*(one(i, a, b) for i, (a, b) in enumerate(pairs))))
    finally:
        cache.close()


def cache_blind(decider, config, data) -> dict:
    """The seventh blind-written pair set (held out from the cache's packaged calibration pairs, sets 1 to 6, less
    the pairs whose two texts both occur there), through the gateway's cache: what its rate-set threshold serves on
    pairs it was not set on."""
    from export_cache_calibration import held_out  # benchmarks/gateway/

    rows, dropped = held_out([json.loads(line) for line in BLIND.read_text().splitlines() if line.strip()])
    served = asyncio.run(_serve_pairs(decider, config, [(r["cached"], r["new"]) for r in rows]))
    return {"kinds": [r["kind"] for r in rows], "labels": [bool(r["same_answer"]) for r in rows], "served": served,
            "dropped": dropped}  # fmt: skip


SECTIONS: dict[str, Callable] = {
    "everyday": everyday,
    "catches": catches,
    "cache_blind": cache_blind,
    "cache": cache_pairs,
    "tool_calls": tool_calls,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--decider", default=None, help="decision backend (default: the default config's)")
    parser.add_argument("--fresh", action="store_true", help="recompute every section")
    parser.add_argument("--decision-timeout-ms", type=float, default=None,
                        help="how long each request's decisions may take before they fall back (default: the config's, "
                        "1000); a decision that falls back is counted as not acting, and the tables count them")
    parser.add_argument("--whole-up-to-chars", type=int, default=None,
                        help="the guard judges texts up to this long whole only (guard.whole_up_to_chars; default: "
                        "the config's, 0: every text of several sentences also in windows)")
    parser.add_argument("--windows-in-context", action="store_true",
                        help="the guard reads its windows from their text's encoder pass (guard.windows_in_context)")
    args = parser.parse_args()
    config = default_config()
    if args.decider:
        config = config.model_copy(update={"decider": args.decider})
    if args.whole_up_to_chars:
        config = guard_whole_up_to(config, args.whole_up_to_chars)
    if args.windows_in_context:
        config = with_guard(config, windows_in_context=True)
    if args.decision_timeout_ms:
        config = config.model_copy(update={"decision_timeout_ms": args.decision_timeout_ms})
    decider = make_decider(config.decider)
    resolved, points = resolve_operating_points(config, decider)
    # Another decider's or setting's run is kept apart (its own results file and section), so it never replaces
    # the default's.
    parts = [
        re.sub(r"[^a-z0-9]+", "-", args.decider.lower()).strip("-") if args.decider else "",
        f"timeout-{args.decision_timeout_ms:g}ms" if args.decision_timeout_ms else "",
        f"whole-{args.whole_up_to_chars}" if args.whole_up_to_chars else "",
        "in-context" if args.windows_in_context else "",
    ]
    slug = "-".join(part for part in parts if part)
    result_path = RESULT.with_name(f"gateway_everyday_{slug}.json") if slug else RESULT
    command = COMMAND + (f" --decider {args.decider}" if args.decider else "") + (
        f" --decision-timeout-ms {args.decision_timeout_ms:g}" if args.decision_timeout_ms else "") + (
        f" --whole-up-to-chars {args.whole_up_to_chars}" if args.whole_up_to_chars else "") + (
        " --windows-in-context" if args.windows_in_context else "")
    saved = {} if args.fresh or not result_path.exists() else json.loads(result_path.read_text())
    # A run is resumed only for the same weights: the identity changes when a model is retrained under its name.
    same_run = (saved.get("decider_identity"), saved.get("decision_timeout_ms")) == (
        decider.identity, config.decision_timeout_ms)  # fmt: skip
    if not same_run:
        saved = {}
    for key in ("sections", "machine"):  # sections this script no longer runs are not reported
        saved[key] = {name: value for name, value in saved.get(key, {}).items() if name in SECTIONS}
    saved["decision_timeout_ms"] = config.decision_timeout_ms
    saved.update({"decider": decider.name, "decider_identity": decider.identity, "command": command,
                  "operating_points": [p.to_dict() for p in points]})  # fmt: skip
    saved["calibration_at_half"] = calibration_at_half(config, decider)
    saved["mean_request_chars"] = mean_request_chars(config)
    data = BenchData(embed=embed_texts_fp32)
    for name, run in SECTIONS.items():
        if name in saved.get("sections", {}):
            print(f"{name}: kept from the last run")
            continue
        started = time.monotonic()
        result = run(decider, resolved, *([data] if name != "everyday" else []))
        saved.setdefault("sections", {})[name] = result
        saved.setdefault("machine", {})[name] = {**machine(), "seconds": round(time.monotonic() - started, 1)}
        result_path.write_text(json.dumps(saved) + "\n")
        print(f"{name}: done in {time.monotonic() - started:.0f} s")
    # the operating points are this run's even where every section was kept (a new calibration file moves them)
    result_path.write_text(json.dumps(saved) + "\n")
    route = resolved.routes[0]
    replace_section("gateway-everyday" + (f"-{slug}" if slug else ""), report(saved, route), DOC)
    print(report(saved, route))


def mean_request_chars(config) -> dict:
    """The mean length of the latest user request on each side (DecisionInputs.user_text)."""
    from jevserve.gateway.calibration import load_calibration
    from jevserve.serving.decision_inputs import decision_inputs

    test = [len(decision_inputs(r.body).user_text) for r in load_everyday("test")]
    train = [len(decision_inputs(r.body).user_text) for r in load_calibration(config.calibration).requests]
    return {"test": float(np.mean(test)), "train": float(np.mean(train))}


def calibration_at_half(config, decider) -> dict:
    """The share of calibration requests guard and harm would act on at 0.5, from the cached calibration scores."""
    from jevserve.gateway.calibration import load_calibration
    from jevserve.gateway.operating_points import ScoreCache, score_key

    data, cache, route, out = load_calibration(config.calibration), ScoreCache(), config.routes[0], {}
    for decision in ("guard", "harm"):
        scores = cache.get(score_key(decider, decision, getattr(route, decision), route, data))
        if scores is not None:
            out[decision] = rate(int(np.sum(scores >= 0.5)), len(scores))
    return out


def acted(probabilities: Sequence[float | None], threshold: float) -> np.ndarray:
    return np.array([p is not None and p >= threshold for p in probabilities])


def at_default_points(spec: str | None, decisions: Sequence[str]) -> tuple:
    """The default config with `spec`'s decider (None: the config's) and a 60 s decision timeout (so nothing falls
    back), its rates resolved: (decider, resolved config, each decision's threshold on the first route)."""
    config = default_config().model_copy(update={"decision_timeout_ms": 60_000.0})
    if spec:
        config = config.model_copy(update={"decider": spec})
    decider = make_decider(config.decider)
    resolved, _ = resolve_operating_points(config, decider)
    route = resolved.routes[0]
    return decider, resolved, {d: getattr(route, d).threshold for d in decisions}


def publish_request_set(description: str, script: str, requests: Path, name: str, doc: Path, *,
                        fields: Callable[[list[dict]], dict], measure: Callable[[str | None, list[dict]], dict],
                        markdown: Callable[[dict], str]) -> None:
    """The command line of a benchmark that reads a committed set of requests (`requests`, JSONL) with each decider
    given (`--decider`, default the embedded one and tuned): `fields` of the rows, each decider's `measure`, the
    command that reproduces them, written as benchmarks/results/NAME.json and section NAME of `doc`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--decider", action="append", help="decider specs (default: the embedded default and tuned)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in jsonl_lines(requests.read_text(encoding="utf-8")) if line.strip()]
    result = {"machine": machine(), **fields(rows),
              "runs": [measure(spec, rows) for spec in args.decider or [None, "tuned"]]}
    result["command"] = f"python benchmarks/gateway/{script}" + "".join(f" --decider {s}" for s in args.decider or [])
    publish(name, result, markdown(result), path=doc)


def refused_by(probabilities: dict[str, Sequence[float | None]], thresholds: dict[str, float]) -> np.ndarray:
    """Per request: whether any of the decisions is at or over its threshold."""
    return np.any([acted(probabilities[d], t) for d, t in thresholds.items()], axis=0)


def report(saved: dict, route) -> str:
    thresholds = {p["decision"]: p["threshold"] for p in saved["operating_points"]}
    modes = {p["decision"]: p["mode"] for p in saved["operating_points"]}
    sections = saved["sections"]
    timeout = saved.get("decision_timeout_ms", 1000.0)
    whole = route.guard.whole_up_to_chars if route.guard is not None else 0
    setting = f", guard judging texts up to {whole} characters whole only" if whole else ""
    lines = [f"Decider `{saved['decider']}`, default config{setting}, decision timeout {timeout:g} ms; command: "
             f"`{saved.get('command', COMMAND)}`.", ""]
    lines += everyday_table(sections["everyday"], thresholds, modes)
    fell_back = np.array([p is None for p in sections["everyday"]["probabilities"]["guard"]])
    lines += ["", f"Requests whose decisions fell back (no answer within {timeout:g} ms; counted as not acted on): "
              f"{fell_back.sum()} of {len(fell_back)}."]
    at_half = {d: acted(sections["everyday"]["probabilities"][d], 0.5) for d in ("guard", "harm")}
    lines += ["", "At a threshold of 0.5 instead, the same decider would act on "
              + " and ".join(f"{show(rate(a.sum(), len(a)))} ({d})" for d, a in at_half.items())
              + " of these everyday requests; on the calibration (train) side, from the same cached scores the "
              + "thresholds come from, it would act on "
              + " and ".join(f"{show(r)} ({d})" for d, r in saved["calibration_at_half"].items()) + ". "
              + "The latest user request is {test:.0f} characters long on average on the test side and {train:.0f} on "
              "the calibration side (a long text is judged in more windows).".format(**saved["mean_request_chars"])]
    lines += ["", *catches_table(sections["catches"], thresholds), *tool_call_rows(sections["tool_calls"], thresholds)]
    gate_point = next(p for p in saved["operating_points"] if p["decision"] == "tool_gate")
    lines += ["", tool_gate_at_half(sections, gate_point)]
    cache_point = next(p for p in saved["operating_points"] if p["decision"] == "cache")
    lines += ["", *cache_table(sections["cache"], cache_point["threshold"])]
    lines += ["", cache_choice(cache_point, sections.get("cache_blind"))]
    load = ", ".join(f"{k} {v['loadavg_before']:.1f} ({v['seconds']:.0f} s)" for k, v in saved["machine"].items())
    lines += ["", f"Machine: {next(iter(saved['machine'].values()))['cpus']} CPUs; 1-minute load average before each "
              f"section: {load}."]  # fmt: skip
    return "\n".join(lines)


def everyday_table(section: dict, thresholds: dict, modes: dict) -> list[str]:
    shapes = np.array(section["shapes"])
    acts = {d: acted(section["probabilities"][d], thresholds[d]) for d in DECISIONS}
    enforced = [d for d in DECISIONS if modes[d] == "enforce"]
    overall = np.any([acts[d] for d in enforced], axis=0)
    head = [f"{d} ({modes[d]}, threshold {thresholds[d]:.3f})" for d in DECISIONS]
    lines = ["| shape | " + " | ".join(head) + " | refused (any enforced) |", "|---" * (len(DECISIONS) + 2) + "|"]
    for shape in (*SHAPES, "all"):
        mask = shapes == shape if shape != "all" else np.ones(len(shapes), bool)
        cells = [show(rate(acts[d][mask].sum(), mask.sum())) for d in DECISIONS]
        lines.append(f"| {shape} | " + " | ".join(cells) + f" | {show(rate(overall[mask].sum(), mask.sum()))} |")
    return lines


def catches_table(section: dict, thresholds: dict) -> list[str]:
    lines = ["| test side | what | acted on | with a harmless suffix | fell back (no answer in time) |",
             "|---|---|---|---|---|"]
    for task, decision, positive in (
        ("guard-injection", "guard", "injections blocked by guard"),
        ("guard-jailbreak", "guard", "jailbreaks blocked by guard"),
        ("guard-harmful", "harm", "harmful requests blocked by harm"),
        ("guard-overrefusal", "harm", "harmful requests blocked by harm"),
    ):
        row = section[task]
        labels = np.array(row["labels"])
        blocked = acted(row["plain"]["guard"], thresholds["guard"]) | acted(row["plain"]["harm"], thresholds["harm"])
        own = acted(row["plain"][decision], thresholds[decision])
        suffix = acted(row["suffixed"][decision], thresholds[decision])
        missing = np.array([p is None for p in row["plain"][decision]])
        missing_suffixed = sum(p is None for p in row["suffixed"][decision])
        lines.append(f"| {task} | {positive} | {show(rate(own[labels].sum(), labels.sum()))} | "
                     f"{show(rate(suffix.sum(), len(suffix)))} | "
                     f"{missing[labels].sum()} plain, {missing_suffixed} suffixed |")  # fmt: skip
        if (~labels).any():
            refused = show(rate(blocked[~labels].sum(), (~labels).sum()))
            lines.append(f"| {task} | benign refused (guard or harm) | {refused} | | {missing[~labels].sum()} |")
    risk = section["agent-action-risk"]
    labels = np.array(risk["labels"])
    gate = acted(risk["unsafe"], thresholds["tool_gate"])
    unsafe, safe = show(rate(gate[labels].sum(), labels.sum())), show(rate(gate[~labels].sum(), (~labels).sum()))
    lines.append(f"| agent-action-risk | unsafe tool calls blocked by tool_gate | {unsafe} | | |")
    lines.append(f"| agent-action-risk | safe tool calls blocked | {safe} | | |")
    return lines


def tool_call_rows(section: dict, thresholds: dict) -> list[str]:
    """The tool gate on held-out ordinary calls (per shape) and on the calls made by rule (catches table rows)."""
    lines = []
    ordinary = section["ordinary"]
    shapes, blocked = np.array(ordinary["shapes"]), acted(ordinary["unsafe"], thresholds["tool_gate"])
    for shape in sorted(set(shapes.tolist())):
        mine = blocked[shapes == shape]
        shown = show(rate(mine.sum(), len(mine)))
        lines.append(f"| bfcl ({shape}, held out) | ordinary tool calls blocked | {shown} | | |")
    rules = section["rules"]
    labels, gate = np.array(rules["labels"]), acted(rules["unsafe"], thresholds["tool_gate"])
    lines.append(f"| rule-made calls (held out) | destructive calls blocked | "
                 f"{show(rate(gate[labels].sum(), labels.sum()))} | | |")
    scoped = show(rate(gate[~labels].sum(), (~labels).sum()))
    lines.append(f"| rule-made calls (held out) | scoped calls blocked | {scoped} | | |")
    return lines


def tool_gate_at_half(sections: dict, point: dict) -> str:
    """One sentence: what the tool gate would block at 0.5 instead of its threshold in force."""
    risk, calls = sections["catches"]["agent-action-risk"], sections["tool_calls"]
    labels, rules = np.array(risk["labels"]), np.array(calls["rules"]["labels"])
    scores = (risk["unsafe"], calls["ordinary"]["unsafe"], calls["rules"]["unsafe"])
    gate, ordinary, made = (acted(p, 0.5) for p in scores)
    if point.get("max_false_action_rate") is None:
        head = f"The tool gate's threshold ({point['threshold']:.3f}) is set by hand"
    else:
        head = (
            f"The tool gate's threshold ({point['threshold']:.3f}) is the lowest that blocks at most "
            f"{100 * point['max_false_action_rate']:g} % of the packaged ordinary calls (BFCL's train side, and "
            "scoped calls of held-out composed templates) in "
            "each shape"
        )
    return (
        f"{head}; at 0.5 instead the same decider would block "
        f"{show(rate(ordinary.sum(), len(ordinary)))} of the held-out ordinary calls, "
        f"{show(rate(gate[labels].sum(), labels.sum()))} of agent-action-risk's unsafe calls and "
        f"{show(rate(gate[~labels].sum(), (~labels).sum()))} of its safe ones, "
        f"{show(rate(made[rules].sum(), rules.sum()))} of the destructive rule-made calls and "
        f"{show(rate(made[~rules].sum(), (~rules).sum()))} of the scoped ones."
    )


def served_at(rows: Sequence[dict], threshold: float) -> np.ndarray:
    """Served at `threshold`: an exact repeat, or a semantic candidate with P(reuse) >= threshold."""
    return np.array([r["tier"] == "exact" or (r["probability"] is not None and r["probability"] >= threshold)
                     for r in rows])  # fmt: skip


HAND_SET_CACHE_THRESHOLD = 0.75  # the threshold the cache studies read before the gateway set it by a rate


def cache_table(section: dict, threshold: float) -> list[str]:
    kinds = np.array(section["kinds"])
    served = served_at(section["served"], threshold)
    hand = served_at(section["served"], HAND_SET_CACHE_THRESHOLD)  # beside it, for the studies that read 0.75
    exact = np.array([r["tier"] == "exact" for r in section["exact_served"]])
    lines = [f"| pairs (cache threshold {threshold:.3f}) | should it be served? | served | served at "
             f"{HAND_SET_CACHE_THRESHOLD} |", "|---|---|---|---|"]  # fmt: skip
    for kind in sorted(set(kinds.tolist()), key=lambda k: ("paraphrase" in k, k)):
        mask = kinds == kind
        should = "yes" if "paraphrase" in kind else "no (a different answer)"
        lines.append(f"| {kind} | {should} | {show(rate(served[mask].sum(), mask.sum()))} | "
                     f"{int(hand[mask].sum())}/{int(mask.sum())} |")  # fmt: skip
    different = np.array(["paraphrase" not in k for k in kinds])
    lines.append(f"| all different-answer pairs | no | {show(rate(served[different].sum(), different.sum()))} | "
                 f"{int(hand[different].sum())}/{int(different.sum())} |")  # fmt: skip
    lines.append(f"| exact repeats (the same request again) | yes | {show(rate(exact.sum(), len(exact)))} | – |")
    return lines



def cache_choice(point: dict, blind: dict | None) -> str:
    """How the cache's threshold was set, and what it serves of the held-out blind-written set."""
    if point.get("max_false_action_rate") is None:
        return f"The cache's threshold ({point['threshold']:.3f}) is set by hand in the config."
    text = (
        f"The cache's threshold ({point['threshold']:.3f}) is set as the guard's is, by a rate: the lowest at which at "
        f"most {point['max_false_action_rate']:.0%} of each kind of the {point['num_requests']} packaged "
        "different-answer pairs (the first six blind-written sets, never fitted on) would be served; it serves "
        f"{point['calibration_rate']:.1%} of them."
    )
    if blind is None:
        return text
    labels = np.array(blind["labels"])
    served = served_at(blind["served"], point["threshold"])
    return text + (
        " On the seventh blind-written set, held out from that calibration (less "
        f"{blind.get('dropped', 0)} pairs whose two texts both occur among the calibration pairs),"
        " through the gateway: "
        f"{show(rate(int(np.sum(served & ~labels)), int(np.sum(~labels))))} of its different-answer pairs served and "
        f"{show(rate(int(np.sum(served & labels)), int(np.sum(labels))))} of its same-answer ones"
        + _at_hand_set(blind) + "."
    )


def _at_hand_set(blind: dict) -> str:
    """What the hand-set threshold would serve of the blind set: its different-answer pairs (the changed intents
    apart, the kind it served most), and its same-answer ones."""
    labels, kinds = np.array(blind["labels"]), np.array(blind["kinds"])
    hand = served_at(blind["served"], HAND_SET_CACHE_THRESHOLD)
    intents = kinds == "intent"
    return (f" (at the hand-set {HAND_SET_CACHE_THRESHOLD}: {int(np.sum(hand & ~labels))} of {int(np.sum(~labels))}"
            f" different-answer pairs, {int(np.sum(hand & intents))} of them of the {int(np.sum(intents))} changed "
            f"intents, and {int(np.sum(hand & labels))} of {int(np.sum(labels))} same-answer ones)")


if __name__ == "__main__":
    main()
