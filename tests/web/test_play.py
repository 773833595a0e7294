"""The playground over HTTP in process: a full round, two players at once, double submits, and bad input."""

from __future__ import annotations

import html
import re
import threading

import pytest
from fastapi.testclient import TestClient

from jevserve.web.answering import stored_rows
from jevserve.web.decisions import DECISIONS
from jevserve.web.store import Store
from tests.web.builders import RESULTS, make_app, options, play_item, start_round


@pytest.fixture()
def app(tmp_path):
    return make_app(tmp_path / "db.sqlite")


def _client(app) -> TestClient:
    return TestClient(app, raise_server_exceptions=False)


def test_full_round_reveals_truth_model_and_time_then_summarises(app, tmp_path):
    client = _client(app)
    url = start_round(client)
    for position in range(5):
        answered = play_item(client, url, position)
        assert answered.headers["location"] == f"{url}/reveal/{position}"
        reveal = client.get(answered.headers["location"])
        assert reveal.status_code == 200
        assert "The answer is" in reveal.text and "default-rules" in reveal.text  # a board row's stored answer
        decision = next(d for d in DECISIONS.values() if f"· {d.title}</p>" in reveal.text)
        if decision.key == "length":  # the bin is the stored prediction's, only the probabilities are asked
            assert ("jev-minilm-1<span class=\"note\">(served, asked live; the bin is its stored prediction's)"
                    in html.unescape(reveal.text))
            continue
        assert 'jev-minilm-1<span class="note">(served, asked live)' in reveal.text
        # the rule its answer applies, as its results hold it: a "Yes" at P(yes) 0.49 is readable beside it
        rule = next(r for r in stored_rows(RESULTS) if r.model == "jev-minilm-1").rules[decision.task]
        sign = "≥" if rule["direction"] > 0 else "≤"
        assert f"“Yes” at P(yes) {sign} {rule['threshold']:.3f}" in reveal.text
    summary = client.get(url)
    assert "Round done" in summary.text
    counts = Store(tmp_path / "db.sqlite").counts()
    assert counts == {"rounds": 1, "round_items": 5, "answers": 5, "model_answers": 5}


def test_completed_round_appears_as_the_people_row_of_the_board(app):
    client = _client(app)
    url = start_round(client)
    for position in range(5):
        play_item(client, url, position)
    board = client.get("/")
    assert "people (playground)" in board.text
    assert "1 round" in board.text
    assert client.get("/people").text.count("<tr>") >= 2


def test_the_people_row_counts_the_rounds_answered_not_the_most_played_decision(app):
    """Rounds left after one or two answers (a player who walks away) counted as none: an outside tester's board
    said "4 rounds · 17 answers" for answers from 6 rounds."""
    client = _client(app)
    url = start_round(client)
    for position in range(5):
        play_item(client, url, position)
    for _ in range(2):  # two more rounds, one item each: the first decision's count is 3, the rounds are 3
        play_item(client, start_round(client), 0)
    assert "3 rounds · 7 answers" in client.get("/").text


def test_double_submitted_answer_is_stored_once_and_the_first_stands(app, tmp_path):
    client = _client(app)
    url = start_round(client)
    first_choice, other_choice = options(client.get(url).text)[:2]
    first = client.post(f"{url}/answer", data={"position": "0", "choice": first_choice}, follow_redirects=False)
    again = client.post(f"{url}/answer", data={"position": "0", "choice": other_choice}, follow_redirects=False)
    assert first.status_code == again.status_code == 303
    assert again.headers["location"].startswith(first.headers["location"])
    (row,) = Store(tmp_path / "db.sqlite").answer_rows()
    assert row["choice"] == first_choice
    # the second tab is told its own answer was not stored and shown which one was, not judged on the first one
    second = client.get(again.headers["location"])
    assert second.status_code == 200 and 'id="not-stored"' in second.text
    assert "Your answer here was not stored" in second.text and "Not quite" not in second.text
    label = dict(_decision_options(second.text))
    assert f"Your answer just now, “{label.get(other_choice, other_choice)}”" in second.text
    # the same tab, back and answered again, is one of the two ways here: not only "another tab"
    assert "already been answered (before you went back to it, or in another tab)" in " ".join(second.text.split())
    assert f"the first answer stands: “{label.get(first_choice, first_choice)}”" in second.text
    # the same answer sent twice is just the first answer: nothing to explain
    same = client.post(f"{url}/answer", data={"position": "0", "choice": first_choice}, follow_redirects=False)
    assert same.headers["location"] == first.headers["location"]
    assert 'id="not-stored"' not in client.get(first.headers["location"]).text


def _decision_options(reveal: str) -> list[tuple[str, str]]:
    # value → label of the item's decision, read back from the decision table (labels are what pages show)
    from jevserve.web.decisions import DECISIONS

    title = re.search(r'<p class="progress">Item \d+ of \d+ · ([^<]+)</p>', reveal).group(1)
    decision = next(d for d in DECISIONS.values() if d.title == title)
    return [(v, html.escape(decision.option_label(v))) for v, _ in decision.options]


def test_concurrent_double_submit_stores_one_row(app, tmp_path):
    client = _client(app)
    url = start_round(client)
    choices = options(client.get(url).text)[:2]
    statuses = []

    def submit(choice: str) -> None:
        statuses.append(client.post(f"{url}/answer", data={"position": "0", "choice": choice},
                                    follow_redirects=False).status_code)

    threads = [threading.Thread(target=submit, args=(c,)) for c in choices * 4]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [303] * 8
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 1


def test_two_players_at_once_keep_their_own_rounds(app, tmp_path):
    alice, bob = _client(app), _client(app)
    urls = {}

    def play(name: str, client: TestClient) -> None:
        urls[name] = start_round(client)
        for position in range(5):
            assert play_item(client, urls[name], position).status_code == 303

    threads = [threading.Thread(target=play, args=p) for p in (("alice", alice), ("bob", bob))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert urls["alice"] != urls["bob"]
    assert alice.get(urls["bob"]).status_code == 404  # someone else's round
    rows = Store(tmp_path / "db.sqlite").answer_rows()
    assert len(rows) == 10
    assert len({(r["round_id"], r["position"]) for r in rows}) == 10
    assert len({r["session_id"] for r in rows}) == 2


def test_reload_of_an_item_page_keeps_the_first_shown_time(app, tmp_path):
    client = _client(app)
    url = start_round(client)
    assert client.head(url).status_code == 200  # a link checker's HEAD shows nobody the item: no clock yet
    assert Store(tmp_path / "db.sqlite").get_round(url.rsplit("/", 1)[1]).items[0].shown_at is None
    assert client.get(url + "/reveal/²").status_code == 400
    client.get(url)
    first = Store(tmp_path / "db.sqlite").get_round(url.rsplit("/", 1)[1]).items[0].shown_at
    client.get(url)
    assert Store(tmp_path / "db.sqlite").get_round(url.rsplit("/", 1)[1]).items[0].shown_at == first


@pytest.mark.parametrize(
    ("path", "data", "status"),
    [
        ("/play/rounds/AAAAAAAAAAAAAAAAAAAAAA", None, 404),  # unknown round
        ("/play/rounds/../../etc/passwd", None, 404),
        ("/play/rounds/'; DROP TABLE rounds; --", None, 404),  # tampered id
        ("/models/no-such-model", None, 404),
        ("/tasks/no-such-task", None, 404),
        ("/?category=nope", None, 400),
        ("/?sort=task:nope", None, 400),
        ("/?kind=robots", None, 400),
    ],
)
def test_bad_urls_get_a_4xx_page(app, path, data, status):
    response = _client(app).get(path)
    assert response.status_code == status
    assert "text/html" in response.headers["content-type"]


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"position": "0", "choice": "maybe"}, 400),  # not an option
        ({"position": "7", "choice": "yes"}, 400),  # unknown item
        ({"position": "-1", "choice": "yes"}, 400),
        ({"position": "zero", "choice": "yes"}, 400),
        ({"position": "²", "choice": "yes"}, 400),  # a digit to str.isdigit(), not to int(): it was a 500
        ({"position": "0" * 5000, "choice": "yes"}, 400),  # past int()'s 4,300 digits: it was a 500
        ({"choice": "yes"}, 400),
        ({"position": "3", "choice": "yes"}, 409),  # not the current item
        ({"position": "0", "choice": "x" * 100_000}, 413),  # huge form field
    ],
)
def test_bad_answers_get_a_4xx_page_and_store_nothing(app, tmp_path, data, status):
    client = _client(app)
    url = start_round(client)
    current = options(client.get(url).text)[0]
    data = {k: (current if v == "yes" else v) for k, v in data.items()}  # a valid answer where one is meant
    response = client.post(f"{url}/answer", data=data, follow_redirects=False)
    assert response.status_code == status, response.text
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 0


def test_answer_to_a_tampered_round_id_is_a_404(app, tmp_path):
    client = _client(app)
    url = start_round(client)
    client.get(url)
    tampered = url[:-1] + ("A" if url[-1] != "A" else "B")
    response = client.post(f"{tampered}/answer", data={"position": "0", "choice": "yes"})
    assert response.status_code == 404
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 0


def test_non_utf8_form_body_is_a_400(app):
    client = _client(app)
    url = start_round(client)
    response = client.post(f"{url}/answer", content=b"position=0&choice=\xff\xfe",
                           headers={"content-type": "application/x-www-form-urlencoded"})
    assert response.status_code == 400


def test_a_reveal_of_a_position_of_thousands_of_digits_is_a_400(app):
    client = _client(app)
    url = start_round(client)
    assert client.get(f"{url}/reveal/{'0' * 5000}").status_code == 400


def test_reveal_before_answering_is_a_409(app):
    client = _client(app)
    url = start_round(client)
    page = client.get(f"{url}/reveal/0")
    assert page.status_code == 409
    assert f'answer it at <a href="{url}">{url}</a>' in page.text  # where to go is a link, not text to copy


def test_an_error_page_links_the_site_paths_it_names_and_escapes_the_rest(app):
    page = _client(app).get("/play/rounds/%3Cb%3Eplay")
    assert page.status_code == 404
    assert "<b>play" not in page.text and "&#39;&lt;b&gt;play&#39;" in page.text  # the id as sent, escaped
    assert 'start one at <a href="/play">/play</a>' in page.text


def test_model_that_fails_gives_a_503_page_and_the_answer_is_kept(tmp_path):
    class Down:
        name = "jev-minilm-1"

        def decide(self, body):
            raise ConnectionError("connection refused")

    client = _client(make_app(tmp_path / "db.sqlite", decider=Down()))
    url = start_round(client)
    answered = play_item(client, url, 0)
    assert answered.status_code == 503 and "did not answer" in answered.text and f"{url}/reveal/0" in answered.text
    # the reveal shows the truth and the person's answer all the same; only the model's row waits
    reveal = client.get(f"{url}/reveal/0")
    (row,) = Store(tmp_path / "db.sqlite").answer_rows()
    assert reveal.status_code == 200 and "The answer is" in reveal.text
    assert 'id="served-error"' in reveal.text and "not available yet" in reveal.text and "did not answer" in reveal.text
    assert "reload to retry" in reveal.text and "(served, asked live" not in reveal.text
    # the why stays in the host's log: an outside tester read the backend's internal URL on the public page
    assert "connection refused" not in answered.text and "connection refused" not in reveal.text
    label = dict(_decision_options(reveal.text))
    assert f"“{label[row['truth']]}”" in reveal.text
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 1


def test_the_model_is_asked_when_the_answer_is_stored_not_when_the_reveal_is_read(tmp_path):
    client = _client(make_app(tmp_path / "db.sqlite"))
    url = start_round(client)
    for position in range(5):  # the 303 to each reveal page is never followed
        assert play_item(client, url, position).status_code == 303
    rows = Store(tmp_path / "db.sqlite").answer_rows()
    assert len(rows) == 5
    assert all(r["model_choice"] is not None and r["model_probabilities"] for r in rows if r["decision"] != "length")
    assert all(r["model_probabilities"] and r["model_decision_ms"] is not None for r in rows)


def test_a_model_down_when_the_answer_is_stored_is_asked_again_by_the_reveal(tmp_path):
    from tests.web.builders import StubDecider

    class Flaky(StubDecider):
        down = True

        def decide(self, body):
            if self.down:
                raise ConnectionError("connection refused")
            return super().decide(body)

    decider = Flaky()
    client = _client(make_app(tmp_path / "db.sqlite", decider=decider))
    url = start_round(client)
    assert play_item(client, url, 0).status_code == 503
    store = Store(tmp_path / "db.sqlite")
    assert store.counts()["answers"] == 1 and store.counts()["model_answers"] == 0
    decider.down = False
    reveal = client.get(f"{url}/reveal/0")
    assert reveal.status_code == 200 and "(served, asked live" in reveal.text
    assert store.counts()["model_answers"] == 1


def test_reveal_shows_a_board_row_probabilities_from_its_answers_cache(tmp_path):
    import json

    from jevserve.bench import TASKS
    from jevserve.bench.answers_cache import request_key
    from jevserve.web.answering import _as_bench_item
    from jevserve.web.decisions import DECISIONS
    from tests.web.builders import results_pools

    pools = results_pools()
    caches = tmp_path / "answers"
    caches.mkdir()
    with (caches / "jev-minilm-zs@abc.jsonl").open("w") as f:
        for key, decision in DECISIONS.items():
            task = TASKS[decision.task]
            for item in pools.items[key].values():
                answers = {task.primary: {"type": "noul", "noul": 0.125}} if key != "length" else {}
                f.write(json.dumps({"key": request_key("jev-minilm-zs", task.request(_as_bench_item(item))),
                                    "answers": answers}) + "\n")
    client = _client(make_app(tmp_path / "db.sqlite", answers_dir=caches))
    url = start_round(client)
    texts = [client.get(play_item(client, url, p).headers["location"]).text for p in range(5)]
    assert any("yes 0.12 · no 0.88" in t for t in texts)


def test_a_baseline_row_on_a_length_item_says_why_it_shows_no_bin(app):
    # its stored value is the score it ranks by, not a token count: a bare "–" left visitors guessing
    client = _client(app)
    url = start_round(client)
    texts = [client.get(play_item(client, url, p).headers["location"]).text for p in range(5)]
    length = [t for t in texts if "bin is that of its stored\nlength-regression prediction" in t]
    assert length, "a round holds a reply-length item"
    assert "no bin: its length score ranks requests, it predicts no token count" in length[0]
    assert all("no bin:" not in t for t in texts if t not in length)


def test_the_people_page_does_not_wait_for_the_item_pools(tmp_path, monkeypatch):
    import threading

    from fastapi.testclient import TestClient

    from jevserve.web import decisions
    from jevserve.web.app import WebSettings, create_app
    from tests.web.builders import RESULTS, StubDecider, results_pools, shared_site

    release = threading.Event()

    def slow_pools(data):
        release.wait(30)  # as the bench data takes tens of seconds on a fresh start
        return results_pools()

    monkeypatch.setattr(decisions, "load_pools", slow_pools)
    app = create_app(WebSettings(results_dir=RESULTS, db_path=tmp_path / "db.sqlite", decider=StubDecider(),
                                 site=shared_site(), data_factory=lambda: None))  # fmt: skip
    client = TestClient(app)
    first = client.get("/people")
    assert first.status_code == 200 and 'id="expected-loading"' in first.text
    release.set()
    context = app.state.context
    for _ in range(300):
        if context.pools_if_ready() is not None:
            break
        threading.Event().wait(0.01)
    later = client.get("/people")
    assert 'id="expected"' in later.text and 'id="expected-loading"' not in later.text


def test_pools_whose_background_loading_failed_are_loaded_again_by_a_later_page(tmp_path, monkeypatch):
    """A fresh install's loader thread died on an import error, and the pools were never loaded in the background
    again."""
    from jevserve.web import decisions
    from jevserve.web.app import WebSettings, create_app
    from tests.web.builders import RESULTS, StubDecider, results_pools, shared_site

    calls = []

    def failing_once(data):
        calls.append(1)
        if len(calls) == 1:
            raise ImportError("cannot import name 'BaseLibSVM' from partially initialized module 'sklearn.svm._base'")
        return results_pools()

    monkeypatch.setattr(decisions, "load_pools", failing_once)
    app = create_app(WebSettings(results_dir=RESULTS, db_path=tmp_path / "db.sqlite", decider=StubDecider(),
                                 site=shared_site(), data_factory=lambda: None))  # fmt: skip
    context = app.state.context
    found = None
    for _ in range(500):
        found = context.pools_if_ready()
        if found is not None:
            break
        threading.Event().wait(0.01)
    assert found is not None and len(calls) == 2  # the second ask after the failure loaded them


def test_starting_a_round_while_the_pools_load_is_told_to_come_back_and_no_page_waits(tmp_path, monkeypatch):
    # the first "Start a round" after a fresh start loaded the pools inside the event loop: every page of the site
    # waited for it (41 s for /methodology in an outside tester's run); later it waited in a worker thread, and a
    # visitor's tab spun for up to 57 s with no word: the start is answered 503 with Retry-After at once
    import time

    from fastapi.testclient import TestClient

    from jevserve.web import decisions
    from jevserve.web.app import WebSettings, create_app
    from tests.web.builders import RESULTS, StubDecider, results_pools, shared_site

    release = threading.Event()

    def slow_pools(data):
        release.wait(30)
        return results_pools()

    monkeypatch.setattr(decisions, "load_pools", slow_pools)
    app = create_app(WebSettings(results_dir=RESULTS, db_path=tmp_path / "db.sqlite", decider=StubDecider(),
                                 site=shared_site(), data_factory=lambda: None, max_rounds=2))  # fmt: skip
    with TestClient(app) as client:
        before = time.monotonic()
        early = client.post("/play/rounds", follow_redirects=False)
        waited = time.monotonic() - before
        # a start refused while the pools load is no round started: it does not count against --max-rounds
        assert [client.post("/play/rounds", follow_redirects=False).status_code for _ in range(3)] == [503] * 3
        page = client.get("/play")
        release.set()
        for _ in range(100):  # the pools finish loading in the background
            if 'id="pools-loading"' not in (ready_page := client.get("/play")).text:
                break
            time.sleep(0.05)
        for _ in range(100):  # the pools finish loading in the background
            later = client.post("/play/rounds", follow_redirects=False)
            if later.status_code != 503:
                break
            time.sleep(0.05)
    assert early.status_code == 503 and early.headers["retry-after"] == "15" and waited < 5, waited
    assert "still being read" in early.text
    assert page.status_code == 200 and later.status_code == 303
    # the Play page says the items are still being read, and stops saying it once they are
    assert 'id="pools-loading"' in page.text and 'id="pools-loading"' not in ready_page.text


def test_only_starting_a_round_sets_the_session_cookie(app):
    client = _client(app)
    for response in (client.get("/"), client.get("/play"), client.get("/people"), client.get("/nope"),
                     client.get("/static/site.css"), client.put("/live"), client.get("/favicon.ico"),
                     client.get("/play/rounds/AAAAAAAAAAAAAAAAAAAAAA"), client.post("/play/rounds", json={})):
        assert "set-cookie" not in response.headers, response.request.url
    started = client.post("/play/rounds", follow_redirects=False)
    assert started.status_code == 303 and "jevserve_session=" in started.headers["set-cookie"]
    # a session that has one keeps it: no second cookie for the next round
    again = client.post("/play/rounds", follow_redirects=False)
    assert again.status_code == 303 and "set-cookie" not in again.headers


def test_a_session_id_the_client_chose_is_replaced_by_one_the_site_signs(tmp_path):
    db = tmp_path / "db.sqlite"
    chooser = TestClient(make_app(db), cookies={"jevserve_session": "chosen_by_client_1234"})
    started = chooser.post("/play/rounds", follow_redirects=False)
    assert started.status_code == 303 and "jevserve_session=" in started.headers["set-cookie"]
    issued = _cookie_set(started)
    assert issued != "chosen_by_client_1234" and "." in issued
    (stored,) = {row[0] for row in _sessions(db)}
    assert stored == issued
    url = started.headers["location"]
    assert TestClient(make_app(db), cookies={"jevserve_session": issued}).get(url).status_code == 200
    assert TestClient(make_app(db), cookies={"jevserve_session": "chosen_by_client_1234"}).get(url).status_code == 404
    # each check opens a new app on the file, as a restart does: the key is kept in the database
    # the same token with another signature, or the token alone, is no session: the round is a 404
    token = issued.partition(".")[0]
    for forged in (token, f"{token}.{'0' * 32}", f"{token}.{issued.partition('.')[2].upper()}"):
        assert TestClient(make_app(db), cookies={"jevserve_session": forged}).get(url).status_code == 404
    # another database signs with another key, so an id from one site opens nothing on the other
    other = TestClient(make_app(tmp_path / "other.sqlite"), cookies={"jevserve_session": issued})
    moved = other.post("/play/rounds", follow_redirects=False)
    assert moved.status_code == 303 and _cookie_set(moved) not in ("", issued)


def _cookie_set(response) -> str:
    return response.headers.get("set-cookie", "").partition("jevserve_session=")[2].partition(";")[0]


def _sessions(db):
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT session_id FROM rounds").fetchall()


def test_an_address_may_start_a_limited_number_of_rounds(tmp_path):
    app = make_app(tmp_path / "db.sqlite", max_rounds=3)
    players = [_client(app) for _ in range(4)]  # four "players" without cookies, as a script poses them
    for player in players[:3]:
        start_round(player)
    refused = players[3].post("/play/rounds", follow_redirects=False)
    assert refused.status_code == 429 and "text/html" in refused.headers["content-type"]
    assert 0 < int(refused.headers["retry-after"]) <= 600
    assert "started 3 rounds in the last 10 minutes" in refused.text and "try again in" in refused.text
    assert "set-cookie" not in refused.headers
    assert Store(tmp_path / "db.sqlite").counts()["rounds"] == 3
    unlimited = make_app(tmp_path / "other.sqlite", max_rounds=0)
    for _ in range(5):
        start_round(_client(unlimited))


def test_the_round_limit_frees_a_start_once_the_window_has_passed():
    from jevserve.web.context import RoundLimit

    now = [0.0]
    limit = RoundLimit(2, 600.0, clock=lambda: now[0])
    assert limit.admit("a") is None and limit.admit("a") is None
    assert limit.admit("a") == 600.0 and limit.admit("b") is None  # another address has its own count
    now[0] = 599.0
    assert limit.admit("a") == 1.0
    now[0] = 600.0
    assert limit.admit("a") is None


def test_answers_faster_than_reading_are_stored_but_not_counted(tmp_path):
    app = make_app(tmp_path / "db.sqlite", min_answer_ms=1000.0)
    client = _client(app)
    url = start_round(client)
    for position in range(5):
        answered = play_item(client, url, position)  # answered within milliseconds of the item page
        # the player is told at once, not only on /people later (an outside tester was not)
        reveal = client.get(answered.headers["location"]).text
        assert 'id="too-fast"' in reveal and "under 1.0 s" in reveal and "not counted in the people row" in reveal
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 5
    people = client.get("/people").text
    assert 'id="left-out"' in people and "5 answers were given" in people and "less than 1.0 s" in people
    assert "No answers yet" in people  # nothing left to count
    assert "people (playground)" not in client.get("/").text
    # an answer given after a second counts: the item was shown two seconds ago
    second = start_round(client)
    client.get(second)
    store = Store(tmp_path / "db.sqlite")
    round_id = second.rsplit("/", 1)[1]
    with store._transaction() as conn:
        conn.execute("UPDATE round_items SET shown_at = shown_at - 2 WHERE round_id = ?", (round_id,))
    page = client.get(second).text
    counted_reveal = client.post(f"{second}/answer", data={"position": "0", "choice": options(page)[0]})
    assert "You took" in counted_reveal.text and 'id="too-fast"' not in counted_reveal.text
    people = client.get("/people").text
    assert "5 answers were given" in people and "No answers yet" not in people
    assert "people (playground)" in client.get("/").text


def test_the_people_page_says_what_a_player_is(app):
    text = _client(app).get("/people").text
    assert "A “player” is a browser session" in text and "not a controlled study" in text
    assert "every reveal shows the truth" in text and "at most 30 rounds per 10 minutes" in text


def test_a_form_that_stops_arriving_gets_408_and_the_connection_closes(app, monkeypatch):
    # an outside tester's client declared Content-Length 500, sent 7 bytes and waited: after 70 s the connection
    # was still open (the other servers answer 408 after 30 s)
    import asyncio

    from jevserve.web import context as context_module

    monkeypatch.setattr(context_module, "FORM_TIMEOUT_S", 0.2)
    messages = iter([{"type": "http.request", "body": b"text=a", "more_body": True}])
    sent = []

    async def receive():
        message = next(messages, None)
        if message is None:
            await asyncio.sleep(30)  # the rest never comes
        return message

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/live", "raw_path": b"/live", "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/x-www-form-urlencoded"),
                         (b"content-length", b"500")],
             "client": ("127.0.0.1", 40000), "server": ("testserver", 80)}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    (start,) = [m for m in sent if m["type"] == "http.response.start"]
    assert start["status"] == 408 and (b"connection", b"close") in start["headers"]
    assert b"did not arrive within 0.2 s" in b"".join(m.get("body", b"") for m in sent)


@pytest.mark.parametrize("path", ["/live", "/play/rounds"])
def test_a_visitor_who_leaves_mid_form_gets_no_traceback_in_the_log(app, caplog, path):
    # an outside tester's client sent Content-Length 500 and closed after a few bytes: the log got a 68-line
    # ERROR traceback (ClientDisconnect) for a visitor who had simply gone; then, with read_form's 499, the error
    # page's handler failed on a status the standard library does not name (HTTPStatus(499)): the whole app is run
    import asyncio
    import logging

    messages = iter([{"type": "http.request", "body": b"text=a", "more_body": True}, {"type": "http.disconnect"}])
    sent = []

    async def receive():
        return next(messages, {"type": "http.disconnect"})

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"testserver"), (b"content-type", b"application/x-www-form-urlencoded"),
                         (b"content-length", b"500")],
             "client": ("127.0.0.1", 40000), "server": ("testserver", 80)}
    with caplog.at_level(logging.ERROR):
        asyncio.run(app(scope, receive, send))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [499]


def test_a_model_served_under_its_new_name_applies_the_thresholds_filed_under_its_row(tmp_path):
    # `jevserve web --model minilm-reader` applied 0.5 (no row of that name) and listed its own stored row beside it
    from tests.web.builders import StubDecider

    class Renamed(StubDecider):
        name = "minilm-reader-new"

    app = make_app(tmp_path / "db.sqlite", Renamed(), board_names={"minilm-reader-new": "jev-minilm-1"})
    client = _client(app)
    url = start_round(client)
    rules = next(r for r in stored_rows(RESULTS) if r.model == "jev-minilm-1").rules
    for position in range(5):
        reveal = client.get(play_item(client, url, position).headers["location"]).text
        decision = next(d for d in DECISIONS.values() if f"· {d.title}</p>" in reveal)
        assert 'minilm-reader-new<span class="note">(served, asked live' in reveal
        assert "jev-minilm-1 <span" not in reveal  # not again as a stored row
        if decision.key != "length":
            rule = rules[decision.task]
            sign = "≥" if rule["direction"] > 0 else "≤"
            assert f"“Yes” at P(yes) {sign} {rule['threshold']:.3f}" in reveal


@pytest.mark.parametrize("data", [{"position": "0", "choice": ""}, {"position": "0"}])
def test_answer_pressed_before_a_choice_asks_the_same_item_again_and_stores_nothing(app, tmp_path, data):
    """The radios were `required`, which screen readers read as "invalid" before any choice: the server asks again
    instead, saying why, with the answers focused; the question has the focus on a first showing."""
    client = _client(app)
    url = start_round(client)
    first = client.get(f"{url}?unanswered=0").text  # a link, not a submit: the item was never shown before
    assert 'id="question" tabindex="-1" autofocus' in first and " required" not in first
    assert "Choose an answer first" not in first
    response = client.post(f"{url}/answer", data=data, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].endswith("?unanswered=0")
    again = client.get(response.headers["location"]).text
    assert 'role="alert">Choose an answer first' in again and "Item 1 of 5" in again
    assert 'aria-invalid="true"' in again and "aria-invalid" not in first  # the group is said to lack an answer
    assert again.count("autofocus") == 1 and 'value="' + options(again)[0] + '" autofocus' in again
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 0
    assert "Choose an answer first" not in client.get(f"{url}?unanswered=3").text  # only for the item shown
    # answered, then its page again (Back) and Answer with nothing chosen: an outside tester got a 400 page
    # ("choice '' is not an answer"); the stored answer stands and its reveal is shown
    answered = client.post(f"{url}/answer", data={"position": "0", "choice": options(again)[0]},
                           follow_redirects=False)
    assert answered.status_code == 303
    response = client.post(f"{url}/answer", data=data, follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"].endswith("/reveal/0")
    assert Store(tmp_path / "db.sqlite").counts()["answers"] == 1


def _restarted_mid_round(tmp_path, monkeypatch):
    """A round started with its first item shown, then the site restarted with its pools not yet read: the app
    factory, the database, the round's URL, the player's cookies, the first item's first option, and the event that
    lets the pools load."""
    import time

    from jevserve.web import decisions
    from jevserve.web.app import WebSettings, create_app
    from tests.web.builders import RESULTS, StubDecider, results_pools, shared_site

    def app_on(db):
        return create_app(WebSettings(results_dir=RESULTS, db_path=db, decider=StubDecider(), site=shared_site(),
                                      data_factory=lambda: None))  # fmt: skip

    db = tmp_path / "db.sqlite"
    monkeypatch.setattr(decisions, "load_pools", lambda data: results_pools())
    with TestClient(app_on(db)) as before:
        for _ in range(100):
            started = before.post("/play/rounds", follow_redirects=False)
            if started.status_code == 303:
                break
            time.sleep(0.05)
        url, cookies = started.headers["location"], dict(before.cookies)
        page = before.get(url)
        assert page.status_code == 200
    release = threading.Event()
    monkeypatch.setattr(decisions, "load_pools", lambda data: release.wait(30) and results_pools())
    return app_on, db, url, cookies, options(page.text)[0], release


def _until_not_503(send):
    import time

    for _ in range(100):
        got = send()
        if got.status_code != 503:
            return got
        time.sleep(0.05)
    return got


def test_a_round_page_reloaded_while_the_pools_load_is_told_to_come_back(tmp_path, monkeypatch):
    # an outside tester reloaded a round's item page just after a restart: it waited 182 s for the pools, where
    # starting a round is answered 503 with Retry-After at once
    import time

    app_on, db, url, cookies, _, release = _restarted_mid_round(tmp_path, monkeypatch)
    with TestClient(app_on(db), cookies=cookies) as after:  # the restart: pools not read yet
        began = time.monotonic()
        early = after.get(url)
        waited = time.monotonic() - began
        release.set()
        later = _until_not_503(lambda: after.get(url))
    assert early.status_code == 503 and early.headers["retry-after"] == "15" and waited < 5, (early, waited)
    assert "still being read" in early.text and later.status_code == 200


def test_an_answer_sent_while_the_pools_load_is_told_to_come_back_and_the_item_stays_open(tmp_path, monkeypatch):
    # an outside tester answered the item on screen just after a restart: the answer waited 74 s for the pools (and
    # its time counted the wait), where the round page and the reveal answer 503 at once
    import time

    app_on, db, url, cookies, choice, release = _restarted_mid_round(tmp_path, monkeypatch)
    data = {"position": "0", "choice": choice}
    with TestClient(app_on(db), cookies=cookies) as after:  # the restart: pools not read yet
        began = time.monotonic()
        early = after.post(f"{url}/answer", data=data, follow_redirects=False)
        waited = time.monotonic() - began
        assert Store(db).counts()["answers"] == 0  # nothing stored: the item is still open
        release.set()
        later = _until_not_503(lambda: after.post(f"{url}/answer", data=data, follow_redirects=False))
    assert early.status_code == 503 and early.headers["retry-after"] == "15" and waited < 5, (early, waited)
    assert later.status_code == 303 and later.headers["location"].endswith("/reveal/0")
    assert Store(db).counts()["answers"] == 1
