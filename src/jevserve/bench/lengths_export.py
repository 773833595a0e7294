"""`jevserve bench predict-lengths`: reply-length predictions for every ShareGPT request the simulator uses.

The regression is fitted on every train-side request (no cap here; train requests whose prompt text is also a test
text are left out of the fit, as in the bench task) and predicts all 15,396 valid requests, train and test. Each
JSON line carries its side, so a simulation on the test side never uses a prediction fitted on its own reply.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from jevserve.bench.task import Item, frozen


def _items(table: Any) -> list[Item]:
    return [
        Item(item_id=r.request_id, state=r.prompt, label=int(r.num_output_tokens), split=r.split, source="sharegpt",
             extra=frozen({"prompt_tokens": int(r.num_prompt_tokens),
                           "fit": r.split == "train" and not r.text_in_test}))
        for r in table.requests
        if r.valid
    ]


def write_predictions(path: Path, items: list[Item], predicted: np.ndarray) -> None:
    """JSONL lines {"request_id", "predicted_tokens", "split"}, written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for item, tokens in zip(items, predicted, strict=True):
            f.write(json.dumps({"request_id": item.item_id, "predicted_tokens": round(float(tokens), 1),
                                "split": item.split}) + "\n")
    tmp.replace(path)


def export_lengths(args: argparse.Namespace) -> int:
    """Ask, fit, predict and write; prints the held-out metrics. Returns the exit status."""
    from jevserve.bench.answers_cache import request_key
    from jevserve.bench.length import length_report
    from jevserve.bench.outputs import output_problem
    from jevserve.bench.runner import AskFailed, ask_endpoint, keyed
    from jevserve.bench.sharegpt_data import load_sharegpt
    from jevserve.bench.tasks.schedule_reply_length import ScheduleReplyLength

    problem = output_problem(args.out, folder=False)
    if problem:
        print(f"error: --out {args.out}: {problem}", file=sys.stderr)
        return 2
    if args.endpoint == "embedded" and args.answers_version is not None:
        print("error: --answers-version is for a URL endpoint; the embedded models' answers are versioned by their "
              "weights", file=sys.stderr)
        return 2
    task = ScheduleReplyLength()
    items = _items(load_sharegpt())
    started = time.perf_counter()
    try:
        asked = ask_endpoint(args.endpoint, args.model, args.api_key_env, args.answers_cache,
                             lambda model: keyed(model, [task.request(i) for i in items]),
                             concurrency=args.concurrency, progress=not args.no_progress,
                             serve_embedded=args.serve_embedded, version=args.answers_version)
    except AskFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    stats = asked.stats
    answers = [asked.cache.get(request_key(asked.model, task.request(i))) for i in items]
    fit = [k for k, i in enumerate(items) if i.extra["fit"]]
    test = [k for k, i in enumerate(items) if i.split == "test"]
    from jevserve.predict import ReplyLengthRegressor, answer_features

    columns = answer_features(task.questions, answers)
    prompt = task.default_scores(items, None)
    truth = task.labels(items)
    regressor = ReplyLengthRegressor().fit(columns[fit], prompt[fit], truth[fit])
    predicted = regressor.predict(columns, prompt)
    write_predictions(args.out, items, predicted)
    prompt_only = ReplyLengthRegressor().fit(np.empty((len(fit), 0)), prompt[fit], truth[fit])
    baseline = prompt_only.predict(np.empty((len(test), 0)), prompt[test])
    report = {
        "model": length_report(predicted[test], truth[test]),
        "prompt_length": length_report(baseline, truth[test]),
    }
    print(f"{len(items)} predictions -> {args.out} (fitted on {len(fit)} train requests; "
          f"{stats.num_sent} requests sent, {stats.num_cached} cached, {time.perf_counter() - started:.0f} s)")
    for name, numbers in report.items():
        print(f"  test ({numbers['num_requests']}) {name:>13}: tau-b {numbers['kendall_tau_b']:.3f}, median ratio "
              f"error {numbers['median_ratio_error']:.2f}, within 2x {numbers['within_2x']:.3f}, 4-bin accuracy "
              f"{numbers['bin_accuracy']:.3f}")
    return 0
