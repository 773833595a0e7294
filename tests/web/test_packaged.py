"""Outside a checkout there is no results folder: the site serves the board packaged with jevserve."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from jevserve.bench.board_snapshot import results_key
from jevserve.web import WebSettings, create_app
from jevserve.web.cli import DEFAULT_RESULTS
from jevserve.web.site import PACKAGED_BOARD, SiteCache
from tests.web.builders import RESULTS, StubDecider, results_pools


def test_the_packaged_board_is_the_committed_board():
    packaged = json.loads(PACKAGED_BOARD.read_text(encoding="utf-8"))
    assert packaged["results_key"] == results_key(RESULTS), "run `jevserve bench board --package`"


def test_without_results_the_site_serves_the_packaged_board(tmp_path):
    site = SiteCache(None)
    app = create_app(WebSettings(results_dir=None, db_path=tmp_path / "db.sqlite", decider=StubDecider(),
                                 pools=results_pools(), site=site))
    client = TestClient(app, raise_server_exceptions=False)
    board = client.get("/")
    assert board.status_code == 200
    for row in site.board().rows[:3]:
        assert row.model in board.text
        page = client.get(f"/models/{row.model}")
        assert page.status_code == 200 and "the board packaged with jevserve" in page.text
        # the per-task table lists the row's scored tasks, and says where the rest of its columns come from
        assert page.text.count('<th scope="row" class="txt"><a href="/tasks/') == len(row.tasks) > 0
        assert "a checkout's <code>results/</code> holds" in page.text
    assert site.get().documents == {}
    assert "people-note" not in board.text  # nobody has played


def test_answers_the_packaged_board_cannot_score_are_said_to_be_unscored(tmp_path):
    from jevserve.web.store import Store

    store = Store(tmp_path / "db.sqlite")
    store.create_round("r1", "s1", 0, "m", [("guard", "item-1")])
    store.record_answer("r1", 0, "yes", "yes", True, 900.0)
    app = create_app(WebSettings(results_dir=None, db_path=tmp_path / "db.sqlite", decider=StubDecider(),
                                 pools=results_pools(), site=SiteCache(None)))
    page = TestClient(app, raise_server_exceptions=False).get("/?kind=people")
    assert page.status_code == 200 and 'id="people-note"' in page.text
    assert "answers are not scored on this board" in page.text
    # nor does the play page promise it (an outside tester's "Your answers join the people row" joined nothing)
    play = TestClient(app).get("/play").text
    assert "join the people row" not in play and "cannot score them" in " ".join(play.split())


def test_jevserve_web_outside_a_checkout_starts_on_the_packaged_board(tmp_path, monkeypatch, capsys):
    import contextlib
    import types

    import uvicorn

    from jevserve.web import cli

    served = {}

    @contextlib.contextmanager
    def endpoint(*args, **kwargs):
        yield types.SimpleNamespace(base_url="http://127.0.0.1:9", model="stub", api_key=None, label="stub")

    class Server:
        def __init__(self, config):
            served["app"] = config.app

        def run(self, sockets):
            served["ran"] = True

    monkeypatch.chdir(tmp_path)  # no results/ here
    monkeypatch.setattr("jevserve.gateway.config.load_config", lambda path: None)
    monkeypatch.setattr("jevserve.bench.endpoint.open_endpoint", endpoint)
    monkeypatch.setattr("jevserve.web.live.live_demo", lambda endpoint, config: None)
    monkeypatch.setattr("jevserve.web.context.Context.warm", lambda self: None)
    monkeypatch.setattr(uvicorn, "Server", Server)
    assert not (tmp_path / DEFAULT_RESULTS).exists()
    assert cli.serve_command(cli_args(tmp_path)) == 0 and served["ran"]
    err = capsys.readouterr().err
    assert "the board is the one packaged with jevserve" in err and "no such folder" not in err
    assert served["app"].state.context.settings.results_dir is None


def test_outside_a_checkout_a_bad_argument_is_the_only_message(tmp_path, monkeypatch, capsys):
    from jevserve.web import cli

    monkeypatch.chdir(tmp_path)  # no results/ here: the packaged board would be served
    args = cli_args(tmp_path)
    args.port = 99999
    assert cli.serve_command(args) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["jevserve web: --port 99999: expected 0–65535"]


def cli_args(tmp_path):
    import argparse

    return argparse.Namespace(results=DEFAULT_RESULTS, gateway_config=None, host="127.0.0.1", port=0,
                              db=tmp_path / "db.sqlite", endpoint="embedded", model=None, api_key_env=None,
                              answers_cache=None, max_rounds=30, forwarded_allow_ips=None, access_log=False)


def test_a_board_snapshot_from_bench_board_out_is_served(tmp_path, monkeypatch):
    # the site read results folders only: the board.json `bench board --out DIR` writes could not be shown
    import dataclasses

    from jevserve.bench import board_snapshot
    from jevserve.bench.board_snapshot import read_snapshot, write_snapshot

    packaged = read_snapshot(PACKAGED_BOARD)
    mine = dataclasses.replace(packaged, rows=packaged.rows[:2])
    snapshot = write_snapshot(mine, "not these results", tmp_path / "out" / "board.json")
    # without a results folder it stands in for the packaged board
    assert [r.model for r in SiteCache(None, snapshot=snapshot).board().rows] == [r.model for r in mine.rows]
    # with one, it is read first when it was computed from those results, and never recomputed then
    matching = write_snapshot(mine, results_key(RESULTS), tmp_path / "matching" / "board.json")
    monkeypatch.setattr(board_snapshot, "build_board", lambda *a: (_ for _ in ()).throw(AssertionError("built")))
    assert len(SiteCache(RESULTS, None, snapshot=matching).board().rows) == 2


def test_a_board_file_that_is_no_snapshot_is_refused_before_anything_starts(tmp_path, capsys):
    from jevserve.web import cli

    args = cli_args(tmp_path)
    (tmp_path / "empty.json").write_text("{}")
    for board, said in ((tmp_path / "missing.json", "no such file"), (tmp_path / "empty.json", "not a board")):
        args.board = board
        assert cli.serve_command(args) == 2
        assert f"--board {board}: {said}" in capsys.readouterr().err
