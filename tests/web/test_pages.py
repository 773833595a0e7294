"""The reading pages follow the committed results: every row, every task, filters, sorting, model and task pages."""

from __future__ import annotations

import re
import threading

import pytest
from fastapi.testclient import TestClient

from jevserve.bench.results import latest_results
from tests.web.builders import RESULTS, make_app


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    return TestClient(make_app(tmp_path_factory.mktemp("web") / "db.sqlite"), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def documents():
    return latest_results(RESULTS).documents


def _body_rows(html: str) -> list[str]:
    return re.findall(r'<th scope="row" class="txt" data-v="([^"]+)"', html)


def test_board_lists_every_results_row_and_links_every_task(client, documents):
    page = client.get("/")
    assert page.status_code == 200
    assert sorted(_body_rows(page.text)) == sorted(d["model"] for d in documents)
    for task in {t for d in documents for t in d["tasks"]}:
        assert f'href="/tasks/{task}"' in page.text
    assert "?sort=task:" not in page.text  # task columns appear within a category only
    # the caption counts what the columns are: categories here, not "0 tasks"
    categories = {t["category"] for d in documents for t in d["tasks"].values()}
    assert f"{len(documents)} rows × {len(categories)} categories</caption>" in page.text


def test_the_board_serves_its_forest_plot(client):
    assert 'src="/plots/headline.png"' in client.get("/").text
    image = client.get("/plots/headline.png")
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert image.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get("/plots/nope.png").status_code == 404


def test_board_shows_rank_intervals_and_average_intervals(client):
    page = client.get("/").text
    assert re.search(r'<td class="txt" data-v="1">1 <span class="ci">\[\d+–\d+\]</span>', page)
    assert re.search(r'<span class="ci">\[-?\d+\.\d, -?\d+\.\d\]</span>', page)


def test_category_filter_keeps_only_that_category_columns(client, documents):
    page = client.get("/?category=cache").text
    shown = set(re.findall(r"\?sort=task:([a-z-]+)", page))
    expected = {t for d in documents for t, r in d["tasks"].items() if r["category"] == "cache"}
    assert shown == expected


def test_kind_filter_keeps_only_that_kind_of_row(client, documents):
    rows = _body_rows(client.get("/?kind=baseline").text)
    assert sorted(rows) == sorted(d["model"] for d in documents if d.get("row_kind") == "baseline")


def test_server_side_sort_orders_rows_by_the_column_descending(client):
    rows = _body_rows(client.get("/?sort=task:guard-injection&category=guard").text)
    board = client.app.state.context.site.board()
    scores = {r.model: r.tasks["guard-injection"].score for r in board.rows if "guard-injection" in r.tasks}
    ranked = [r for r in rows if r in scores]
    assert ranked == sorted(scores, key=lambda m: -scores[m])


def test_a_sort_column_the_category_view_does_not_show_is_refused(client):
    refused = client.get("/?sort=task:cache-pairs&category=guard")
    assert refused.status_code == 400
    assert "is not on the guard view" in refused.text and "guard-injection" in refused.text
    assert client.get("/?sort=category:cache&category=guard").status_code == 400
    hidden = client.get("/?sort=task:cache-pairs")  # no category: the task columns are not on the page either
    assert hidden.status_code == 400 and "/?category=cache&amp;sort=task:cache-pairs" in hidden.text
    for shown in ("average", "category:guard", "task:guard-injection"):
        assert client.get(f"/?sort={shown}&category=guard").status_code == 200


def test_a_kind_filter_leaves_out_the_notes_about_the_rows_it_hides(client):
    board = client.app.state.context.site.board()
    named = {w.split(":", 1)[0] for w in board.warnings} & {r.model for r in board.rows}
    if not named:
        pytest.skip("the committed results have no note naming a row")
    everything = html_text(client.get("/").text)
    assert all(w in everything for w in board.warnings)
    kinds = {r.model: r.kind for r in board.rows}
    for kind in {*kinds.values(), "people"}:
        page = html_text(client.get(f"/?kind={kind}").text)
        for warning in board.warnings:
            model = warning.split(":", 1)[0]
            assert (warning in page) == (model not in kinds or kinds[model] == kind), (kind, warning[:60])


def html_text(page: str) -> str:
    import html

    return html.unescape(page)


def test_board_reads_without_javascript(client):
    page = client.get("/").text
    assert "<table" in page and 'src="/static/sort.js"' in page
    assert client.get("/static/sort.js").status_code == 200


def test_model_page_shows_per_task_scores_and_calibration(client, documents):
    document = next(d for d in documents if d["model"] == "jev-minilm-1")
    page = client.get("/models/jev-minilm-1").text
    for task, result in document["tasks"].items():
        assert f'href="/tasks/{task}"' in page
        if result["brier"] is not None:
            assert f"{result['brier']:.3f}" in page
    assert document["command"] in page


def task_page_when_read(client, name: str):
    """The task page once its data is read (the first visits answer at once, saying it is being read)."""
    for _ in range(600):
        page = client.get(f"/tasks/{name}")
        if page.status_code != 200 or "is being read and screened" not in page.text:
            return page
        threading.Event().wait(0.2)
    raise AssertionError(f"task {name}'s data was not read within two minutes")


def test_task_page_shows_decision_questions_rule_and_anchors(client):
    page = task_page_when_read(client, "cache-pairs")
    if page.status_code == 404:
        pytest.skip(f"cache-pairs data is not on this machine: {page.text[:200]}")
    text = page.text
    for label in ("decision", "data", "split", "rule (model)", "default (score 0)", "oracle", "metric"):
        assert f"<dt>{label}</dt>" in text
    assert "Does the answer to the cached question also correctly answer the new question?" in text
    assert re.search(r"train [\d,]+ / test [\d,]+", text)


def test_methodology_page_explains_score_intervals_and_playground(client):
    page = client.get("/methodology").text
    assert "score = 100 × (m − m_default) / (m_oracle − m_chance)" in page
    assert "paired" in page and "export-rounds" in page


def test_head_answers_like_get_without_a_body(client):
    for path in ("/", "/healthz", "/methodology", "/static/site.css"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    assert client.head("/no-such-page").status_code == 404
    assert client.post("/healthz").status_code == 405  # only HEAD is read as GET


def test_a_task_page_answers_at_once_while_its_data_is_read(tmp_path):
    from jevserve.web import site

    release, reading = threading.Event(), threading.Event()

    def slow_describe(name, data, baseline):
        reading.set()
        release.wait(30)  # as reading and screening a task's data takes up to a minute on a fresh start
        return site.TaskDescription(name, "guard", (("data", "read"),), site.task_questions_json(name))

    app = make_app(tmp_path / "db.sqlite", data_factory=lambda: None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(site, "describe_task", slow_describe)
        client = TestClient(app)
        first = client.get("/tasks/guard-injection")  # answered while the reading is still blocked
        assert first.status_code == 200 and "is being read and screened" in first.text
        assert "The questions asked" in first.text and reading.wait(5)
        release.set()
        later = task_page_when_read(client, "guard-injection")
    assert later.status_code == 200 and "<dt>data</dt><dd>read</dd>" in later.text


def test_a_model_page_answers_at_once_while_its_reliability_plot_is_prepared(tmp_path):
    import time

    from jevserve.bench import pipeline
    from jevserve.web import calibration

    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "jev-minilm-1@abc.jsonl").write_text("")  # the page reads it only in the background
    release, reading = threading.Event(), threading.Event()

    def slow_load_tasks(tasks, data, log, everyday):
        reading.set()
        release.wait(30)  # as reading the tasks' data for the plot takes up to a minute on a fresh start
        return [], {}

    curve = calibration.Reliability((0.2, 0.8), (0.1, 0.9), (5, 7), ("guard-injection",), 12, "jev-minilm-1@abc.jsonl")
    app = make_app(tmp_path / "db.sqlite", data_factory=lambda: None, answers_dir=answers)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "load_tasks", slow_load_tasks)
        patch.setattr(calibration, "reliability", lambda answers_dir, name, loaded: curve)
        client = TestClient(app)
        threading.Timer(5, release.set).start()  # so that a page that waits fails rather than hangs
        started = time.monotonic()
        first = client.get("/models/jev-minilm-1")  # answered while the reading is still blocked
        assert time.monotonic() - started < 2 and not release.is_set()
        assert first.status_code == 200 and "is being prepared" in first.text
        assert "Per task" in first.text and reading.wait(5)
        release.set()
        for _ in range(100):
            later = client.get("/models/jev-minilm-1")
            if "is being prepared" not in later.text:
                break
            threading.Event().wait(0.1)
    assert later.status_code == 200 and later.text.count("<circle") == 2 and "12 test items" in later.text


def test_a_model_page_says_when_its_reliability_plot_could_not_be_drawn(tmp_path):
    from jevserve.bench import pipeline

    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "jev-minilm-1@abc.jsonl").write_text("")

    def missing(tasks, data, log, everyday):
        raise FileNotFoundError("no bench data here")

    app = make_app(tmp_path / "db.sqlite", data_factory=lambda: None, answers_dir=answers)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "load_tasks", missing)
        client = TestClient(app, raise_server_exceptions=False)
        for _ in range(100):
            page = client.get("/models/jev-minilm-1")
            if "is being prepared" not in page.text:
                break
            threading.Event().wait(0.1)
    assert page.status_code == 200 and "could not be drawn" in page.text and "no bench data here" in page.text


def test_warming_up_draws_the_headline_plot_before_the_first_visitor_asks(tmp_path):
    from jevserve.bench import board_plots

    drawn = []
    real = board_plots.plot_png
    app = make_app(tmp_path / "db.sqlite")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(board_plots, "plot_png", lambda board, name: drawn.append(name) or real(board, name))
        app.state.context.warm(pools_after_s=0)
        assert drawn == ["headline"]
        image = TestClient(app).get("/plots/headline.png")
    assert image.status_code == 200 and image.content[:4] == b"\x89PNG" and drawn == ["headline"]


def test_framework_errors_are_the_site_error_page_with_a_sentence(client):
    missing = client.get("/nope")
    assert missing.status_code == 404 and "text/html" in missing.headers["content-type"]
    assert "there is no page at /nope" in missing.text and "/methodology" in missing.text
    assert ">Not Found<" not in missing.text
    wrong = client.put("/live")
    assert wrong.status_code == 405 and set(wrong.headers["allow"].split(", ")) >= {"GET", "POST"}
    assert 'PUT is not accepted at <a href="/live">/live</a>; it answers' in wrong.text
    assert 'class="error"' in missing.text and 'class="error"' in wrong.text
    # a path with an escaped character is linked whole or not at all: its first part alone is no page either
    odd = client.get("/models/%3Cb%3Ex%3C%2Fb%3E")
    assert odd.status_code == 404 and "/models/&lt;b&gt;x&lt;/b&gt;" in odd.text
    assert 'href="/models/"' not in odd.text and 'href="/models"' not in odd.text


def test_no_page_can_be_framed_and_the_favicon_is_not_an_error(client):
    for path in ("/", "/nope", "/static/site.css", "/people"):
        response = client.get(path)
        assert response.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    assert client.get("/favicon.ico").status_code == 204


def test_a_models_served_name_leads_to_the_board_row_filed_under_its_earlier_name(tmp_path):
    # the playground and /v1/models say minilm-reader; its results (and row) are filed as jev-minilm-2
    from jevserve.cli import build_parser

    names = build_parser().parse_args(["web"]).board_names()
    assert names["minilm-reader"] == "jev-minilm-2"
    client = TestClient(make_app(tmp_path / "db.sqlite", board_names=names), raise_server_exceptions=False)
    moved = client.get("/models/minilm-reader", follow_redirects=False)
    assert moved.status_code == 308 and moved.headers["location"] == "/models/jev-minilm-2"
    assert client.get("/models/minilm-reader").url.path == "/models/jev-minilm-2"
    missing = client.get("/models/no-such-model")
    assert missing.status_code == 404 and "jev-minilm-2" in missing.text
