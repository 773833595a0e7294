"""What the board's cells say they are: category averages over fewer tasks marked and sorted after complete ones,
near-oracle tasks shown as the raw difference from the rule, the people row averaged and worded like the others, and
notes and stored answers that agree with the cells the board shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.web.builders import make_app, play_item, start_round


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    return TestClient(make_app(tmp_path_factory.mktemp("cells") / "db.sqlite"), raise_server_exceptions=False)


def _board(client):
    return client.app.state.context.site.board()


def _row_html(page: str, model: str) -> str:
    return re.search(rf'<tr class="[a-z]+">\s*<td[^>]*>.*?data-v="{re.escape(model)}">(.*?)</tr>', page, re.S).group(1)


def test_a_category_cell_over_fewer_tasks_is_marked_and_sorts_after_the_complete_ones(client):
    board = _board(client)
    agent = board.category_tasks()["agent"]
    covered = {r.model: sum(t in r.tasks for t in agent) for r in board.rows if "agent" in r.categories}
    partial = {m for m, n in covered.items() if n < len(agent)}
    assert "jev-minilm-1" in partial and covered["minilm-tuned-reader"] == len(agent)
    page = client.get("/?sort=category:agent").text
    order = [m for m in re.findall(r'<th scope="row" class="txt" data-v="([^"]+)"', page) if m in covered]
    assert order.index(max((m for m in order if m in partial), key=order.index)) == len(order) - 1
    assert all(order.index(m) < order.index(p) for m in covered.keys() - partial for p in partial)
    cell = _row_html(page, "jev-minilm-1")
    assert 'data-partial="1"' in cell and f"{covered['jev-minilm-1']} of {len(agent)} tasks" in cell
    assert 'data-partial' not in _row_html(page, "minilm-tuned-reader")


def test_near_oracle_tasks_show_the_raw_difference_everywhere(client):
    board = _board(client)
    assert "guard-jailbreak" in board.near_oracle_tasks
    cell = next(r for r in board.rows if r.model == "minilm-tuned-reader").cells["guard-jailbreak"]
    shown = f"Δ {cell.difference:+.3f}"
    page = client.get("/?category=guard").text
    assert "near-oracle: Δ metric" in page and shown in _row_html(page, "minilm-tuned-reader")
    assert f'data-v="{cell.score:.3f}"' not in _row_html(page, "minilm-tuned-reader")
    model = client.get("/models/minilm-tuned-reader").text
    assert shown in model and f"P(beats rule) {cell.p_beats_rule:.2f}" in model
    methodology = client.get("/methodology").text
    assert "shown as the raw difference from the rule" in methodology


def test_the_intro_places_every_task(client):
    board = _board(client)
    page = re.sub(r"\s+", " ", client.get("/").text)
    outside = [t for t in board.tasks if t not in board.headline_tasks and t not in board.near_oracle_tasks]
    assert outside == ["schedule-return"]
    assert "schedule-return is outside the headline but in its category's average" in page
    assert len(board.headline_tasks) + len(board.near_oracle_tasks) + len(outside) == len(board.tasks)


def test_a_rerun_task_the_board_leaves_out_is_not_called_rerun(client):
    row = next(r for r in _board(client).rows if r.model == "jev-minilm-1")
    # the board itself says so (bench/board.py), so the static board and the site agree
    assert "route-math" not in row.tasks and any("so left out: route-math" in n for n in row.notes)
    page = client.get("/models/jev-minilm-1").text
    note = re.search(r"\(rerun: ([^)]*)\)", page).group(1)
    rerun, left = note.split("; rerun on other test items, so left out: ")
    assert "route-math" in left and "route-math" not in rerun and "guard-injection" in rerun


def test_the_source_only_check_quotes_the_board_cell():
    from jevserve.bench.results import latest_results
    from jevserve.web.pages import _board_source_only
    from jevserve.web.site import SiteCache
    from tests.web.builders import RESULTS

    board = SiteCache(RESULTS).board()
    baseline = next(d for d in latest_results(RESULTS).documents if d["model"] == "default-rules")
    _, text = _board_source_only(board, "guard-overrefusal", baseline)
    cell = next(r for r in board.rows if r.model == "source-majority").tasks["guard-overrefusal"]
    value = baseline["tasks"]["guard-overrefusal"]["metrics"]["source-majority"]["value"]
    assert f"source-majority {value:.3f} → score {cell.score:.1f} [{cell.low:.1f}, {cell.high:.1f}]" in text


def test_the_people_row_has_category_averages_and_is_on_task_pages(tmp_path):
    from jevserve.web.pages import PEOPLE_ROW

    client = TestClient(make_app(tmp_path / "db.sqlite"))
    for _ in range(3):
        url = start_round(client)
        for position in range(5):
            play_item(client, url, position)
    from jevserve.web.pages import _people

    cells = _people(client.app.state.context)  # the cells the board reads
    page = client.get("/?kind=people").text
    row = _row_html(page, PEOPLE_ROW)
    board = _board(client)
    assert f"of {len(board.headline_tasks)} headline tasks: not ranked" in row
    assert "draws of its own" in row
    guard = [t for t in ("guard-injection", "guard-overrefusal") if t in cells and cells[t].score == cells[t].score]
    categories = re.findall(r"<td[^>]*>", row)[1:]  # after the kind: the average, then the categories in order
    from jevserve.bench.task import CATEGORIES

    shown = [c for c in CATEGORIES if any(board.task_categories[t] == c for t in board.tasks)]
    guard_cell = categories[1 + shown.index("guard")]
    if guard:  # the mean of its guard task scores, as a model row's guard cell is
        assert f'data-v="{sum(cells[t].score for t in guard) / len(guard):.3f}"' in guard_cell
    else:  # every guard item answered had one truth: no score, so no average either
        assert 'class="na"' in guard_cell
    for task, cell in cells.items():
        text = client.get(f"/tasks/{task}").text
        scores = re.search(r'<tr class="people">(.*?)</tr>', text, re.S).group(1)
        assert PEOPLE_ROW in scores
        assert f"<td>{cell.score:.1f}</td>" in scores if cell.score == cell.score else "<td>–</td>" in scores


def test_the_reveal_leaves_out_stored_answers_the_board_leaves_out(tmp_path):
    from tests.web.builders import StubDecider

    class Other(StubDecider):
        name = "jev-minilm-2"  # so jev-minilm-1, whose cache-pairs run scored other items, is among the others

    client = TestClient(make_app(tmp_path / "db.sqlite", decider=Other()))
    url = start_round(client)
    seen = {}
    for position in range(5):
        reveal = client.get(play_item(client, url, position).headers["location"]).text
        title = re.search(r'<p class="progress">Item \d+ of \d+ · ([^<]+)</p>', reveal).group(1)
        seen[title] = "jev-minilm-1 <span" in reveal
    assert seen["Prompt injection"] and not seen["Reuse a cached answer"]


def test_a_model_page_names_the_results_file_it_read_and_what_its_run_time_covers(client):
    # a tester's: the page printed results/... for another --results folder, and called a resumed run's time the
    # time of every decision
    context = client.app.state.context
    page = re.sub(r"\s+", " ", client.get("/models/jev-minilm-2").text)
    # by the folder's name: its path on the server is not the public's (an outside tester's deployment showed it)
    folder = Path(context.settings.results_dir)
    newest = max((folder / "jev-minilm-2").glob("*.json"))
    assert f"<code>{folder.name}/jev-minilm-2/{newest.name}</code>" in page and str(folder.parent) not in page
    stored = json.loads(newest.read_text())
    if stored["num_cached"]:  # a resumed run: not every decision's time
        assert (f"the run that wrote the file asked {stored['num_sent']} of its {stored['num_requests']} "
                "requests") in page
    else:
        assert f"Run time {stored['wall_s']:.0f} s for {stored['num_decisions']} decisions." in page
    whole = re.sub(r"\s+", " ", client.get("/models/jev-minilm-3").text)
    assert "Run time 342 s for 72666 decisions." in whole  # all asked in the run that wrote it
