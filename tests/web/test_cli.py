"""`jevserve web` and `jevserve web export-rounds`: bad arguments exit 2 with a message; export writes every answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from jevserve.cli import main
from tests.web.builders import make_app, play_item, start_round

RESULTS = Path(__file__).resolve().parents[2] / "results"  # the committed bench results: a folder the site reads


def test_export_rounds_writes_one_json_line_per_answer(tmp_path, capsys):
    db = tmp_path / "db.sqlite"
    client = TestClient(make_app(db))
    url = start_round(client)
    for position in range(3):
        play_item(client, url, position)
    out = tmp_path / "rounds.jsonl"
    assert main(["web", "export-rounds", str(out), "--db", str(db)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["position"] for r in rows] == [0, 1, 2]
    assert {"round_id", "decision", "item_id", "choice", "truth", "correct", "time_ms"} <= set(rows[0])
    assert "wrote 3 answers" in capsys.readouterr().err
    # OUT a folder was "jevserve web: error: DIR: Is a directory", naming neither the command nor OUT
    assert main(["web", "export-rounds", str(tmp_path), "--db", str(db)]) == 2
    assert f"jevserve web export-rounds: OUT {tmp_path}: a folder; name a file in it" in capsys.readouterr().err


def test_export_rounds_without_a_database_exits_2(tmp_path, capsys):
    assert main(["web", "export-rounds", str(tmp_path / "x.jsonl"), "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "--db" in capsys.readouterr().err


def test_web_with_a_missing_results_folder_exits_2(tmp_path, capsys):
    assert main(["web", "--results", str(tmp_path / "nope"), "--port", "0"]) == 2
    assert "--results" in capsys.readouterr().err


def test_web_with_a_results_folder_holding_no_results_exits_2(tmp_path, capsys):
    # an outside tester's mistyped --results named an empty folder: the site said "serving" and every board page
    # was a 500 "this is a bug in jevserve web"
    assert main(["web", "--results", str(tmp_path), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert f"--results {tmp_path}: no bench results in it" in err


def test_the_playground_database_is_readable_by_its_owner_only(tmp_path):
    # it holds the session cookies and the key that signs them; an outside tester found it world-readable
    from jevserve.web.store import Store

    Store(tmp_path / "play.sqlite")
    assert (tmp_path / "play.sqlite").stat().st_mode & 0o777 == 0o600


def test_a_playground_database_left_readable_by_others_is_made_owner_only(tmp_path):
    # an outside tester re-testing the fix above: a database an older jevserve made (0644) kept its mode
    from jevserve.web.store import Store

    Store(tmp_path / "play.sqlite")
    (tmp_path / "play.sqlite").chmod(0o644)
    Store(tmp_path / "play.sqlite")
    assert (tmp_path / "play.sqlite").stat().st_mode & 0o777 == 0o600


def test_web_with_a_bad_port_exits_2(tmp_path, capsys):
    assert main(["web", "--results", str(RESULTS), "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err


def test_web_with_a_bad_endpoint_exits_2(tmp_path, capsys):
    assert main(["web", "--results", str(RESULTS), "--port", "0", "--endpoint", "ftp://x"]) == 2
    assert "--endpoint" in capsys.readouterr().err


def _db_with_one_answer(tmp_path):
    """A playground database holding one round with one answered item."""
    db = tmp_path / "db.sqlite"
    client = TestClient(make_app(db))
    play_item(client, start_round(client), 0)
    return db


def test_export_rounds_reads_a_db_given_before_the_subcommand(tmp_path):
    db = _db_with_one_answer(tmp_path)
    out = tmp_path / "rounds.jsonl"
    assert main(["web", "--db", str(db), "export-rounds", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 1


def test_web_with_a_bad_gateway_config_exits_2(tmp_path, capsys):
    bad = tmp_path / "gateway.yaml"
    bad.write_text("routes: [1, 2\n")
    assert main(["web", "--results", str(RESULTS), "--port", "0", "--gateway-config", str(bad)]) == 2
    assert f"jevserve web: --gateway-config {bad}" in capsys.readouterr().err  # the flag, then its value
    assert main(["web", "--results", str(RESULTS), "--port", "0", "--gateway-config", "/nonexistent.yaml"]) == 2
    assert "--gateway-config /nonexistent.yaml: cannot read the config" in capsys.readouterr().err


def test_a_file_that_is_not_a_database_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    assert main(["web", "export-rounds", "-", "--db", str(bad)]) == 2
    assert "not a playground database" in capsys.readouterr().err


def test_a_db_that_is_not_the_playgrounds_is_refused_untouched(tmp_path, capsys):
    # a mistyped --db lost its group's and others' access before being refused (as root: any file), and another
    # program's SQLite database would have had the playground's tables added
    import sqlite3

    from jevserve.web.store import Store, StoreError

    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    text.chmod(0o644)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE things (x)")
    other.chmod(0o644)
    # shorter than SQLite's header, SQLite reads it as an empty database: an outside tester's one-byte file was
    # made a playground database, its byte lost and its mode 600
    short = tmp_path / "one.txt"
    short.write_bytes(b"x")
    short.chmod(0o644)
    for path in (text, other, short):
        with pytest.raises(StoreError):
            Store(path)
        assert main(["web", "export-rounds", "-", "--db", str(path)]) == 2
        assert path.stat().st_mode & 0o777 == 0o644
    assert short.read_bytes() == b"x"
    with sqlite3.connect(other) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["things"]
    assert "a SQLite database of something else (tables: things)" in capsys.readouterr().err
    with pytest.raises(StoreError, match="not a file"):
        Store(tmp_path)
    # a path that cannot be made was "PATH: Permission denied", naming no flag (here: under a file)
    with pytest.raises(StoreError, match=r"^--db .*notes.txt/rounds.sqlite: cannot create it \(.*\); pass a path"):
        Store(text / "rounds.sqlite")


def test_databases_that_only_look_like_the_playgrounds_are_refused_untouched(tmp_path, capsys):
    # another program's schema_version table was taken for the playground's (tables added, version bumped, WAL on);
    # a newer jevserve's database ended in a traceback after its mode changed; an export made an empty file a
    # database; refusing a WAL database left -wal and -shm files beside it
    import sqlite3

    from jevserve.web.store import MIGRATIONS, Store, StoreError

    flyway = tmp_path / "flyway.sqlite"
    conn = sqlite3.connect(flyway, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE schema_version (version INTEGER)")
    conn.execute("CREATE TABLE invoices (x)")
    conn.close()  # the last connection checkpoints the WAL into the file and removes it
    flyway.chmod(0o644)
    newer = tmp_path / "newer.sqlite"
    Store(newer)
    conn = sqlite3.connect(newer, isolation_level=None)
    conn.execute("UPDATE schema_version SET version = ?", (len(MIGRATIONS) + 5,))
    conn.close()
    newer.chmod(0o644)
    for path, said in ((flyway, "something else (tables: invoices)"), (newer, "of a newer jevserve")):
        before = path.read_bytes()
        with pytest.raises(StoreError) as refused:
            Store(path)
        assert said in str(refused.value)
        assert main(["web", "export-rounds", "-", "--db", str(path)]) == 2
        assert said in capsys.readouterr().err
        assert path.read_bytes() == before and path.stat().st_mode & 0o777 == 0o644
    assert not (tmp_path / "flyway.sqlite-wal").exists() and not (tmp_path / "flyway.sqlite-shm").exists()
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert main(["web", "export-rounds", "-", "--db", str(empty)]) == 2
    assert "an empty file, which holds no rounds" in capsys.readouterr().err and empty.stat().st_size == 0
    with pytest.raises(StoreError, match="no such file"):
        Store(tmp_path / "new" / "none.sqlite", reading_only=True)
    assert not (tmp_path / "new").exists()


def test_export_leaves_the_databases_modes_as_they_are(tmp_path):
    db = _db_with_one_answer(tmp_path)
    db.chmod(0o640)
    assert main(["web", "export-rounds", str(tmp_path / "r.jsonl"), "--db", str(db)]) == 0
    assert db.stat().st_mode & 0o777 == 0o640


def test_export_into_a_missing_folder_exits_2_and_creates_nothing(tmp_path, capsys):
    db = _db_with_one_answer(tmp_path)
    out = tmp_path / "new" / "folder" / "rounds.jsonl"
    assert main(["web", "export-rounds", str(out), "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(tmp_path / "new" / "folder") in err[0] and "no such folder" in err[0]
    assert not (tmp_path / "new").exists()


def test_export_names_sessions_by_a_pseudonym_not_by_their_cookie(tmp_path):
    import hashlib

    db = tmp_path / "db.sqlite"
    client = TestClient(make_app(db))
    url = start_round(client)
    for position in range(2):
        play_item(client, url, position)
    cookie = client.cookies["jevserve_session"]
    out = tmp_path / "rounds.jsonl"
    assert main(["web", "export-rounds", str(out), "--db", str(db)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert cookie not in out.read_text()
    assert {r["session_id"] for r in rows} == {hashlib.sha256(cookie.encode()).hexdigest()[:16]}
    # the exported name opens nothing: as a cookie it is a stranger's, and the round is a 404
    stranger = TestClient(make_app(db), cookies={"jevserve_session": rows[0]["session_id"]})
    assert stranger.get(url).status_code == 404


def test_a_host_that_does_not_resolve_points_at_the_host(tmp_path, capsys):
    assert main(["web", "--results", str(RESULTS), "--host", "256.1.1.1", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "check --host" in err and "try --port 0" not in err


def test_docs_name_exactly_the_keys_export_rounds_writes(tmp_path):
    import re

    from tests.web.builders import ROOT

    db = _db_with_one_answer(tmp_path)
    out = tmp_path / "rounds.jsonl"
    assert main(["web", "export-rounds", str(out), "--db", str(db)]) == 0
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    docs = (ROOT / "docs" / "web.md").read_text()
    export = docs[docs.index("**Export.**"):docs.index("## Live decisions")]
    documented = re.findall(r"^\| `([a-z_]+)` \|", export, re.MULTILINE)
    assert sorted(documented) == sorted(row)


def test_max_rounds_defaults_to_the_site_default_and_refuses_a_negative(tmp_path, capsys):
    from jevserve.web import cli, context

    assert cli.MAX_ROUNDS == context.MAX_ROUNDS
    for value in ("-1", "x"):  # one style for both: argparse's own words for "x" were another
        with pytest.raises(SystemExit) as refused:
            main(["web", "--results", str(RESULTS), "--port", "0", "--max-rounds", value])
        assert refused.value.code == 2 and f"--max-rounds {value!r}: expected an integer >= 0" in (
            capsys.readouterr().err)


@pytest.mark.parametrize(("given", "taken"), [("*", "*"), ("127.0.0.1, 10.0.0.0/8", "127.0.0.1,10.0.0.0/8"),
                                               ("::1", "::1"), ("notanip", None), ("10.0.0.1/8", None), ("", None)])
def test_proxy_addresses_are_ip_addresses_or_networks(given, taken, capsys):
    # a typo was started with and never matched any connection: the header was ignored without a word
    from jevserve.cli import build_parser

    if taken is not None:
        assert build_parser().parse_args(["web", "--forwarded-allow-ips", given]).forwarded_allow_ips == taken
        return
    with pytest.raises(SystemExit):
        build_parser().parse_args(["web", "--forwarded-allow-ips", given])
    assert "--forwarded-allow-ips" in capsys.readouterr().err


def test_an_answers_cache_that_is_not_there_exits_2(tmp_path, capsys):
    assert main(["web", "--results", str(RESULTS), "--port", "0", "--answers-cache", str(tmp_path / "no")]) == 2
    assert f"--answers-cache {tmp_path / 'no'}: no such folder" in capsys.readouterr().err


def _client_address_seen(forwarded_allow_ips: str | None) -> str:
    """The client address the site's uvicorn settings hand a route when a loopback client sends X-Forwarded-For."""
    import socket
    import threading
    import time

    import httpx
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from jevserve.web.cli import uvicorn_config

    def who(request):
        return JSONResponse(request.client.host if request.client else "-")

    app = Starlette(routes=[Route("/who", who)])

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(app, forwarded_allow_ips))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        port = sock.getsockname()[1]
        return httpx.get(f"http://127.0.0.1:{port}/who", headers={"X-Forwarded-For": "203.0.113.7"}).json()
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_x_forwarded_for_names_the_client_only_from_a_proxy_named_on_the_command_line():
    # uvicorn's own default trusts the header from 127.0.0.1, which let a client on the host pass the round limit
    assert _client_address_seen(None) == "127.0.0.1"
    assert _client_address_seen("127.0.0.1") == "203.0.113.7"


def test_the_access_log_is_off_unless_asked_for():
    # an outside tester hosting the site found no line per request and no flag to turn one on
    from starlette.applications import Starlette

    from jevserve.cli import build_parser
    from jevserve.web.cli import uvicorn_config

    app = Starlette()
    quiet, loud = uvicorn_config(app, None), uvicorn_config(app, None, access_log=True)
    assert not quiet.access_log and loud.access_log and loud.log_level == "info"  # the access lines' level
    assert build_parser().parse_args(["web", "--access-log"]).access_log is True


def test_an_endpoint_nothing_answers_at_is_warned_of_and_one_that_cannot_work_refused():
    # a site started on an unreachable --endpoint said nothing; the playground then failed item after item
    from jevserve.bench.endpoint import EndpointError
    from jevserve.web.cli import endpoint_warning

    assert endpoint_warning("embedded", None, None) is None
    warning = endpoint_warning("http://127.0.0.1:9", "m", None)
    assert warning is not None and warning.startswith("--endpoint http://127.0.0.1:9: nothing answers GET")
    with pytest.raises(EndpointError, match="--model ''"):
        endpoint_warning("http://127.0.0.1:9", "", None)
