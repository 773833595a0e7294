"""`jevserve bench`: argument errors say what to pass."""

from __future__ import annotations

import contextlib

import pytest

from jevserve.cli import main


def test_run_without_an_endpoint_or_baselines_says_what_to_pass(capsys):
    assert main(["bench", "run"]) == 2
    assert "pass --endpoint URL|embedded" in capsys.readouterr().err


def test_run_with_an_unknown_task_lists_the_known_ones(capsys):
    assert main(["bench", "run", "--baselines", "--tasks", "guard-nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown task(s) 'guard-nope'" in err and "guard-injection" in err


def test_a_run_with_no_data_here_says_to_fetch_it(capsys, tmp_path):
    code = main(["bench", "run", "--baselines", "--tasks", "cache-pairs", "--data-cache", str(tmp_path),
                 "--results", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 1
    # into the cache this run reads (an outside tester fetched into the default one and failed the same way again)
    assert f"jevserve data fetch --source fow-cache-pairs --cache {tmp_path}`" in err
    assert f"no task has its data here; run `jevserve data fetch --cache {tmp_path}`" in err


def test_board_without_results_says_to_run_first(capsys, tmp_path):
    assert main(["bench", "board", "--results", str(tmp_path / "none")]) == 1
    assert "run `jevserve bench run` first" in capsys.readouterr().err


def test_metadata_must_be_key_value(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "run", "--baselines", "--metadata", "no-equals-sign"])
    assert exit_info.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_embedded_rows_name_their_own_weights():
    """A tuned model's row must not claim the shipped readout on a frozen encoder."""
    import argparse

    from jevserve.bench.cli import _metadata

    args = argparse.Namespace(concurrency=32, metadata=[])
    tuned = _metadata(args, "embedded", "minilm-tuned-reader", object())
    default = _metadata(args, "embedded", "jev-minilm-2", object())
    assert "fine-tuned" in tuned["parameters"] and "fine-tuned" not in default["parameters"]
    # a URL row's address (a loopback one, an internal host) is no answer to "where does it run": the submitter's
    own = _metadata(args, "http://127.0.0.1:21750", "x", object())
    assert own == {"runs": "its own server, asked over HTTP (--metadata runs=... says on what)"}
    said = argparse.Namespace(concurrency=32, metadata=[("runs", "one A10G")])
    assert _metadata(said, "http://127.0.0.1:21750", "x", object()) == {"runs": "one A10G"}


def test_a_task_list_that_names_no_task_is_an_error_not_the_full_bench(capsys):
    for tasks in ("", ",,", " "):
        assert main(["bench", "run", "--baselines", "--tasks", tasks]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: no task named in") and "cache-pairs" in err


def test_an_unwritable_results_folder_is_refused_before_anything_is_asked(capsys, tmp_path):
    a_file = tmp_path / "afile.txt"
    a_file.write_text("")
    # The endpoint is unreachable and the data missing: either would answer 1, so 2 means the check came first.
    for results, expected in ((a_file, "is a file; expected a folder"), (a_file / "sub", f"{a_file} is a file")):
        code = main(["bench", "run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--tasks", "cache-pairs",
                     "--data-cache", str(tmp_path / "data"), "--results", str(results)])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: --results {results}: ")
        assert expected in err


@pytest.mark.parametrize(("argv", "said"), [
    (["--endpoint", "127.0.0.1:8795", "--model", "m"], "expected 'embedded' or a URL"),
    (["--endpoint", "http://127.0.0.1:9"], "--model is required with a URL endpoint"),
    (["--endpoint", "http://127.0.0.1:9", "--model", "m", "--api-key-env", "JEVSERVE_NO_SUCH_VARIABLE"],
     "that environment variable is not set"),
    (["--endpoint", "embedded", "--api-key-env", "JEVSERVE_NO_SUCH_VARIABLE"], "--api-key-env is for a URL endpoint"),
    # an outside tester's mistakes: a URL with no host, a port past 65535, the route instead of the server's root
    (["--endpoint", "http://", "--model", "m"], "the URL names no host"),
    (["--endpoint", "http://127.0.0.1:99999", "--model", "m"], "the port is not a number from 1 to 65535"),
    (["--endpoint", "http://127.0.0.1:0", "--model", "m"], "the port is not a number from 1 to 65535"),  # was warned
    (["--endpoint", "http://127.0.0.1:9/v1/systemone", "--model", "m"], "give the server's root (http://127.0.0.1:9)"),
    (["--endpoint", "embedded", "--model", ""], "--model '': expected a model's name"),  # ran the whole bench
    # a mistyped embedded name was said only after the data had loaded (half a minute)
    (["--endpoint", "embedded", "--model", "jev-minilm-9"],
     "--model 'jev-minilm-9' is not served by the embedded endpoint; expected one of: minilm-reader (or jev-minilm-2)"),
])
def test_endpoint_arguments_that_cannot_work_are_refused_before_the_data_loads(capsys, tmp_path, monkeypatch, argv,
                                                                              said):
    import jevserve.bench.data as data

    monkeypatch.setattr(data, "BenchData", lambda *a, **k: pytest.fail("the bench data was loaded first"))
    results = tmp_path / "results"
    assert main(["bench", "run", *argv, "--tasks", "cache-pairs", "--results", str(results)]) == 2
    assert said in capsys.readouterr().err
    assert not results.exists()  # a refused command leaves no results folder behind


@pytest.mark.parametrize(("status", "models", "model", "code", "said"), [
    (200, {"object": "list", "data": [{"id": "Qwen/Qwen3-8B"}]}, "Qwen/Qwen3-8B", 2, "is not a System One server"),
    (200, {"models": [{"name": "jev-latest"}, {"name": "a"}]}, "b", 2, "does not serve --model 'b'; it serves a, "),
    (401, {"detail": "no"}, "a", 2, "give --api-key-env"),
    (500, {"detail": "boom"}, "a", 1, "GET /v1/models failed with 500; is the server up"),  # not "no System One"
])  # fmt: skip
def test_the_endpoint_is_asked_what_it_serves_before_the_data_loads(capsys, tmp_path, monkeypatch, status, models,
                                                                     model, code, said):
    import jevserve.bench.data as data

    monkeypatch.setattr(data, "BenchData", lambda *a, **k: pytest.fail("the bench data was loaded first"))
    with _json_server(get=(status, models)) as url:
        assert main(["bench", "run", "--endpoint", url, "--model", model, "--tasks", "cache-pairs",
                     "--results", str(tmp_path)]) == code
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and "Traceback" not in err


def test_an_endpoint_that_answers_its_probes_invalidly_is_told_before_the_data_loads(capsys, tmp_path,
                                                                                     monkeypatch):
    """A submitter fixing their server waited half a minute of data loading per try; a server without the optional
    GET /v1/models was refused as "not a System One server"."""
    import jevserve.bench.data as data

    monkeypatch.setattr(data, "BenchData", lambda *a, **k: pytest.fail("the bench data was loaded first"))
    monkeypatch.setattr("jevserve.bench.replies.INVALID_BACKOFF_S", 0.0)
    # no models route (the contract's SHOULD), and an answer that is no probability
    with _json_server(get=(404, {"detail": "Not Found"}),
                      post=(200, {"answers": {"q": {"type": "noul", "noul": 1.7}}})) as url:
        code = main(["bench", "run", "--endpoint", url, "--model", "m", "--tasks", "cache-pairs",
                     "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "version probe 1 of 3" in err and "noul 1.7" in err and "Traceback" not in err


@contextlib.contextmanager
def _json_server(get: tuple[int, object], post: tuple[int, object] | None = None):
    """A loopback HTTP server answering every GET with `get` (status, JSON payload) and every POST with `post`
    (501 without one); yields its root URL."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def _send(self, answer):
            status, payload = answer
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(get)

        def do_POST(self):
            self.rfile.read(int(self.headers["content-length"]))
            self._send(post or (501, {"detail": "no POST here"}))

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_an_endpoint_where_nothing_answers_is_exit_1_before_the_data_loads(capsys, tmp_path, monkeypatch):
    import jevserve.bench.data as data

    monkeypatch.setattr(data, "BenchData", lambda *a, **k: pytest.fail("the bench data was loaded first"))
    results = tmp_path / "new" / "results"
    assert main(["bench", "run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--tasks", "cache-pairs",
                 "--results", str(results)]) == 1
    assert "nothing answered GET http://127.0.0.1:9/v1/models" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # the folders made to check it is writable went again


def test_the_writable_check_leaves_no_folder_it_made_and_keeps_those_that_were_there(tmp_path):
    from jevserve.bench.outputs import output_problem

    assert output_problem(tmp_path / "a" / "b", folder=True) is None and not (tmp_path / "a").exists()
    (tmp_path / "kept").mkdir()
    assert output_problem(tmp_path / "kept", folder=True) is None and (tmp_path / "kept").is_dir()
    assert output_problem(tmp_path / "c" / "out.jsonl", folder=False) is None and not (tmp_path / "c").exists()


def test_predict_lengths_refuses_an_unwritable_out_before_asking(capsys, tmp_path):
    a_file = tmp_path / "afile.txt"
    a_file.write_text("")
    for out in (a_file / "x.jsonl", tmp_path):
        assert main(["bench", "predict-lengths", "--endpoint", "http://127.0.0.1:9", "--model", "m",
                     "--out", str(out)]) == 2
        assert capsys.readouterr().err.startswith(f"error: --out {out}: ")


def test_ctrl_c_before_the_asking_is_one_line_and_exit_130(capsys, monkeypatch, tmp_path):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("jevserve.bench.pipeline.load_tasks", interrupted)
    try:
        code = main(["bench", "run", "--baselines", "--tasks", "cache-pairs", "--results", str(tmp_path)])
    except KeyboardInterrupt:  # not the test session's own Ctrl-C
        pytest.fail("bench run let KeyboardInterrupt through")
    assert code == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: interrupted;") and "same command again resumes" in err


def test_board_over_results_it_cannot_read_names_them(capsys, tmp_path):
    (tmp_path / "row").mkdir()
    (tmp_path / "row" / "2026-01-01.json").write_text('{"kind": "x"')
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "2026-01-01.json").write_bytes(b"\xff\xfe")
    assert main(["bench", "board", "--results", str(tmp_path), "--out", str(tmp_path / "board")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: no readable bench results under {tmp_path}: ")
    assert "row/2026-01-01.json is not valid JSON" in err and "other/2026-01-01.json is not UTF-8 text" in err


def test_validate_of_a_file_that_is_not_utf8_names_the_problem(capsys, tmp_path):
    from tests.bench.test_board import make_results

    results = make_results(tmp_path)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe")
    assert main(["bench", "validate", str(binary), "--results", str(results)]) == 1
    assert f"{binary} is not UTF-8 text" in capsys.readouterr().out


def test_a_rerun_served_from_the_cache_keeps_the_measured_latency(tmp_path):
    import argparse

    from jevserve.bench.cli import _metadata
    from jevserve.bench.results import write_result

    args = argparse.Namespace(concurrency=32, metadata=[], results=tmp_path)
    measured = _metadata(args, "http://host:1", "m", argparse.Namespace(num_sent=100, wall_s=4.0))
    assert measured["latency"].startswith("25 requests/s")
    write_result(tmp_path, {"model": "m", "date": "2026-01-01", "tasks": {}, "metadata": measured})
    assert _metadata(args, "http://host:1", "m", argparse.Namespace(num_sent=0, wall_s=0.0)) == measured
    assert "latency" not in _metadata(args, "http://host:1", "other", argparse.Namespace(num_sent=0, wall_s=0.0))


def test_a_same_day_rerun_from_other_answers_says_it_replaced_them(tmp_path):
    # a rule and then another model under the same --model name: the day's file was replaced without a word
    from jevserve.bench.cli import _answers_version_of, _replacement_warning
    from jevserve.bench.results import write_result

    first = {"model": "m", "date": "2026-01-01", "tasks": {"a": {}}, "answers_version": "aaaa"}
    write_result(tmp_path, first)
    again = {**first, "answers_version": "aaaa"}
    assert _replacement_warning(write_result(tmp_path, again), again, _answers_version_of(tmp_path, again)) is None
    other = {**first, "answers_version": "bbbb"}
    previous = _answers_version_of(tmp_path, other)
    warning = _replacement_warning(write_result(tmp_path, other), other, previous)
    assert previous == "aaaa" and "from other answers (version aaaa, now bbbb)" in warning
    narrower = {**other, "tasks": {}, "answers_version": "cccc"}  # kept beside it: nothing replaced
    previous = _answers_version_of(tmp_path, narrower)
    assert _replacement_warning(write_result(tmp_path, narrower), narrower, previous) is None


def test_a_damaged_data_cache_is_one_error_line(capsys, monkeypatch, tmp_path):
    from jevserve.bench.sources import SourceFormatError

    def damaged(*args, **kwargs):
        raise SourceFormatError("data source 'x': a file is damaged; run `jevserve data fetch --source x --force`")

    monkeypatch.setattr("jevserve.bench.pipeline.load_tasks", damaged)
    assert main(["bench", "run", "--baselines", "--tasks", "cache-pairs", "--results", str(tmp_path)]) == 1
    assert capsys.readouterr().err == "error: data source 'x': a file is damaged; run `jevserve data fetch " \
                                      "--source x --force`\n"


def test_sigterm_while_the_data_loads_says_how_to_resume_and_exits_143(capsys, monkeypatch, tmp_path):
    # an outside tester's SIGTERM 12 s into a run, while the data loaded, ended it with 143 and not a word (SIGINT
    # there, and SIGTERM while asking, say that the answers are cached)
    import os
    import signal
    import time

    def loading(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        raise AssertionError("SIGTERM was not acted on")

    monkeypatch.setattr("jevserve.bench.pipeline.load_tasks", loading)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["bench", "run", "--baselines", "--tasks", "cache-pairs", "--results", str(tmp_path)]) == 143
    assert capsys.readouterr().err == ("error: stopped by SIGTERM; every answer received is cached, so running the "
                                       "same command again resumes\n")
    assert signal.getsignal(signal.SIGTERM) is before  # put back for whatever runs next in the process


def test_a_baseline_row_that_reads_none_of_the_tasks_is_not_written(tmp_path, monkeypatch, capsys):
    import jevserve.bench.pipeline as pipeline

    monkeypatch.setattr(pipeline, "load_tasks", lambda tasks, data, log=None: (["a loaded task"], []))
    monkeypatch.setattr(pipeline, "score_baselines", lambda *a, **k: [{"model": "source-style", "tasks": {}}])
    results = tmp_path / "r"
    assert main(["bench", "run", "--baselines", "--tasks", "route-math", "--results", str(results)]) == 0
    assert "source-style: reads none of these tasks; nothing written" in capsys.readouterr().out
    assert not (results / "source-style").exists()  # was a file that only said "no task scored"


def test_the_recorded_command_keeps_a_resample_count_other_than_the_default():
    import argparse

    from jevserve.bench.cli import _command

    def args(resamples):
        return argparse.Namespace(endpoint="http://h:1", model="m", tasks="route-math", baselines=False,
                                  split_salt=None, resamples=resamples)

    assert _command(args(10_000)) == "jevserve bench run --endpoint http://h:1 --model m --tasks route-math"
    assert _command(args(200)).endswith("--tasks route-math --resamples 200")  # its intervals depend on it
    # the row's latency note names the concurrency it was measured at
    assert _command(argparse.Namespace(**{**vars(args(10_000)), "concurrency": 4})) == (
        "jevserve bench run --endpoint http://h:1 --model m --concurrency 4 --tasks route-math")
    keyed = argparse.Namespace(**{**vars(args(10_000)), "api_key_env": "MY_KEY"})  # a keyed server needs the flag
    assert _command(keyed) == ("jevserve bench run --endpoint http://h:1 --model m --api-key-env MY_KEY "
                               "--tasks route-math")
    # a tester's: the row's own metadata was left out, so the command did not make the row it was recorded in
    described = argparse.Namespace(**{**vars(args(10_000)), "metadata": [("licence", "MIT"), ("runs", "an A10 box")]})
    assert _command(described).endswith("--tasks route-math --metadata=licence=MIT '--metadata=runs=an A10 box'")
    import shlex

    from jevserve.cli import build_parser

    # a re-tester's: a key starting with "-" was recorded as `--metadata -k=v`, which a replay reads as an option
    odd = [("-k", "v"), ("a", "b=c 'd' $HOME")]
    replayed = build_parser().parse_args(shlex.split(_command(argparse.Namespace(**{**vars(described),
                                                                                   "metadata": odd})))[1:])
    assert replayed.metadata == odd


@pytest.mark.parametrize("count", ["1", "99"])
def test_too_few_resamples_for_a_95_percent_interval_are_refused(capsys, count):
    with pytest.raises(SystemExit) as refused:
        main(["bench", "run", "--baselines", "--resamples", count])
    assert refused.value.code == 2 and "expected an integer >= 100" in capsys.readouterr().err



def test_validate_of_a_missing_file_names_it_before_looking_for_the_reference_row(capsys, tmp_path):
    missing = tmp_path / "nope.json"
    assert main(["bench", "validate", str(missing), "--results", str(tmp_path / "no-results")]) == 2
    assert capsys.readouterr().err.strip() == f"error: no such results file: {missing}"


def test_an_answers_cache_under_a_file_is_named_before_the_data_loads(capsys, tmp_path, monkeypatch):
    import jevserve.bench.data as data
    from jevserve.bench import endpoint

    monkeypatch.setattr(data, "BenchData", lambda *a, **k: pytest.fail("the bench data was loaded first"))
    monkeypatch.setattr(endpoint, "probe_endpoint", lambda *a, **k: None)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    code = main(["bench", "run", "--endpoint", "http://127.0.0.1:9", "--model", "m", "--tasks", "cache-pairs",
                 "--results", str(tmp_path / "results"), "--answers-cache", str(a_file / "sub")])
    assert code == 2 and f"error: --answers-cache {a_file / 'sub'}: {a_file} is a file" in capsys.readouterr().err


def test_validate_names_a_folder_given_for_a_file(capsys, tmp_path):
    assert main(["bench", "validate", str(tmp_path)]) == 2
    assert "a folder; name the results files in it" in capsys.readouterr().err


def test_a_board_written_elsewhere_keeps_its_markdown_inside_its_folder(capsys, tmp_path, monkeypatch):
    # `--out docs/board2` wrote docs/board.md beside it, over the committed table
    from tests.bench.test_board import make_results

    results = make_results(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "board.md").write_text("committed")
    assert main(["bench", "board", "--results", str(results), "--out", "docs/board2"]) == 0
    assert (tmp_path / "docs" / "board.md").read_text() == "committed"
    table = (tmp_path / "docs" / "board2" / "board.md").read_text()
    assert "The HTML board (index.html)" in table
    assert "wrote docs/board2/board.md" in capsys.readouterr().out


def test_a_rows_results_folder_that_cannot_be_written_names_the_results_flag(tmp_path):
    from jevserve.bench.cli import _results_problem

    (tmp_path / "fake-model").write_text("not a folder")
    assert _results_problem(tmp_path, "fake-model") == (
        f"--results {tmp_path}: {tmp_path / 'fake-model'} is a file; expected a folder")
    assert _results_problem(tmp_path, "other-model") is None and not (tmp_path / "other-model").exists()


def test_the_run_summary_names_the_tasks_its_averages_cover_and_where_their_intervals_come_from():
    # a one-task run printed "headline average 35.8 [3.6, 62.1] over 1 task", beside a board showing [2.1, 62.4]
    from jevserve.bench.cli import _summary

    one = {"score": 35.8, "interval": [3.6, 62.1], "num_tasks": 1}
    line = _summary({"average": one, "average_all": dict(one)})
    assert line == ("average over the 1 headline task run 35.8 [3.6, 62.1]; average over the 1 task run 35.8 "
                    "[3.6, 62.1] (95% intervals of this run's draws; the board's shared draws differ a little)")
    assert _summary({"average": {**one, "num_tasks": 0}}) == "no task scored"
    # a near-oracle task run beside it is in neither average: said (an outside tester's run left it to guess)
    run = {"average": {**one, "tasks": ["agent-action-risk"]}, "average_all": {**one, "tasks": ["agent-action-risk"]},
           "tasks": {"agent-action-risk": {}, "agent-web-policy": {}}}
    assert "; agent-web-policy in neither (near-oracle: the default rule is all but the oracle there) (95%" in (
        _summary(run))
