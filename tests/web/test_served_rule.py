"""The playground scores the served model as the bench does: asked live, the embedded default's answers under its
committed rule give the very actions its results file stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from jevserve.bench import BenchData
from jevserve.bench.endpoint import open_endpoint
from jevserve.bench.sources import SourceMissingError
from jevserve.server.in_process import serve_embedded
from jevserve.web.answering import SystemOneDecider, ask_model, stored_choice, stored_rows
from jevserve.web.decisions import DECISIONS, load_pools
from tests.web.builders import RESULTS

pytestmark = pytest.mark.slow


def test_live_answers_of_the_embedded_default_match_its_stored_actions():
    try:
        pools = load_pools(BenchData())
    except SourceMissingError as exc:
        pytest.skip(f"bench data missing: {exc}")
    rows = stored_rows(Path(RESULTS))
    with open_endpoint("embedded", None, serve_embedded=serve_embedded) as endpoint:
        decider = SystemOneDecider(endpoint.base_url, endpoint.model)
        own = next(r for r in rows if r.model == decider.name)
        for key in ("injection", "harmful", "cache"):
            decision = DECISIONS[key]
            items = sorted(pools.items[key].values(), key=lambda i: i.item_id)[:20]
            live = [ask_model(decider, decision, item, rows) for item in items]
            assert [a.choice for a in live] == [stored_choice(own, decision, i.item_id) for i in items], key
            assert all(a.decision_ms > 0 and abs(sum(a.probabilities.values()) - 1) < 1e-6 for a in live)
