"""Builders for web tests: a stub decision model, item pools taken from the committed results, and an app."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jevserve.bench.results import latest_results
from jevserve.web import WebSettings, create_app
from jevserve.web.decisions import DECISIONS, PoolItem, Pools, answer_value
from jevserve.web.site import SiteCache

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
ITEMS_PER_DECISION = 40


class StubDecider:
    """Answers every question with probabilities that depend only on (state, question id); counts its calls."""

    name = "jev-minilm-1"

    def __init__(self) -> None:
        self.num_calls = 0

    def decide(self, body: Mapping[str, Any]) -> dict[str, Any]:
        self.num_calls += 1
        answers = {}
        for key, question in body["questions"].items():
            digest = hashlib.sha256(f"{body['state']}\x1f{key}".encode()).digest()
            p = digest[0] / 255
            if question["type"] == "noul":
                answers[key] = {"type": "noul", "noul": p}
            else:
                options = [str(i) for i in range(len(question["criteria"]))] if question["type"] == "score" \
                    else list(question["criteria"])
                rest = (1 - p) / (len(options) - 1)
                probabilities = {o: (p if i == 0 else rest) for i, o in enumerate(options)}
                answers[key] = {"type": question["type"], "probabilities": probabilities}
        return answers


@cache
def results_pools() -> Pools:
    """Pools of the first test items of each playground task in the committed results (text: a placeholder)."""
    document = next(d for d in latest_results(RESULTS).documents if d["model"] == "default-rules")
    items = {}
    for decision in DECISIONS.values():
        stored = document["tasks"][decision.task]["items"]
        items[decision.key] = [
            PoolItem(item_id, f"Test item {item_id} of {decision.task}.", label, answer_value(decision, label))
            for item_id, label in list(zip(stored["ids"], stored["labels"], strict=True))[:ITEMS_PER_DECISION]
        ]
    return Pools.from_items(items)


@cache
def shared_site() -> SiteCache:
    """One results cache for every test app (the board's resamples are computed once per test session)."""
    return SiteCache(RESULTS)


def make_app(db_path: Path, decider: Any = None, **settings: Any) -> Any:
    """The site on the committed results, a stub model and results-drawn pools, storing rounds in `db_path`.

    Tests answer within milliseconds, so people's numbers count every answer here (`min_answer_ms=0`) unless a test
    sets the floor; the tests of the floor itself do."""
    settings.setdefault("min_answer_ms", 0.0)
    return create_app(WebSettings(
        results_dir=RESULTS, db_path=db_path, decider=StubDecider() if decider is None else decider,
        pools=results_pools(), site=shared_site(), **settings,
    ))


def options(page: str) -> list[str]:
    """The answer options of an item page, in order."""
    return re.findall(r'name="choice" value="([^"]+)"', page)


def first_choice(page: str) -> str:
    """The first answer option of an item page."""
    return options(page)[0]


def play_item(client: Any, round_url: str, position: int, choice: str | None = None) -> Any:
    """Open the round's current item and answer it (the first option unless `choice`); returns the POST response."""
    page = client.get(round_url)
    assert page.status_code == 200, page.text
    return client.post(f"{round_url}/answer", data={"position": str(position), "choice": choice or first_choice(
        page.text)}, follow_redirects=False)


def start_round(client: Any) -> str:
    """Start a round; returns its URL path."""
    response = client.post("/play/rounds", follow_redirects=False)
    assert response.status_code == 303, response.text
    return response.headers["location"]
