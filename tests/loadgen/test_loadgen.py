"""The load generator against stub servers: failures counted by reason, timeouts, interruption, the report."""

import asyncio
import gc
import itertools
import json
import math
import socket
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from jevserve.cli import main
from jevserve.loadgen.client import RequestResult
from jevserve.loadgen.report import build_report, markdown
from jevserve.loadgen.run import replay
from jevserve.loadgen.workload import PlannedRequest
from jevserve.sim.metrics import Slo


def stub_app(*, fail_every: int = 0, hang: bool = False, error_event: dict | None = None,
             models_status: int = 200, speedup: float | None = None, server_ttft_s: float | None = None,
             chunk_gap_s: float = 0.001) -> FastAPI:
    """Streams `max_tokens` one-word chunks, 1 ms apart; every `fail_every`-th request gets a 500; with
    `error_event`, one chunk and then that event. `app.state.posts` counts the requests received. With
    `server_ttft_s`, /metrics reports that TTFT for every request received, as vLLM's histogram does."""
    app = FastAPI()

    if server_ttft_s is not None:
        from fastapi.responses import PlainTextResponse

        @app.get("/metrics")
        async def metrics():
            name, n = "vllm:time_to_first_token_seconds", app.state.posts
            return PlainTextResponse(f"# TYPE {name} histogram\n{name}_bucket{{le=\"+Inf\"}} {n}\n"
                                     f"{name}_count {n}\n{name}_sum {n * server_ttft_s}\n")

    app.state.posts = 0
    app.state.bodies = []
    counter = itertools.count(1)

    @app.get("/v1/models")
    async def models():
        if models_status != 200:
            return JSONResponse({"error": "down"}, status_code=models_status)
        return {"data": [{"id": "stub"} | ({} if speedup is None else {"speedup": speedup})]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        app.state.posts += 1
        app.state.bodies.append(body)
        if fail_every and next(counter) % fail_every == 0:
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)

        async def chunks():
            if hang:
                await asyncio.sleep(30)
            for _ in range(body["max_tokens"]):
                await asyncio.sleep(chunk_gap_s)
                yield "data: " + json.dumps({"choices": [{"index": 0, "text": "w "}]}) + "\n\n"
                if error_event is not None:
                    yield "data: " + json.dumps(error_event) + "\n\n"
            usage = {"prompt_tokens": 3, "completion_tokens": body["max_tokens"]}
            yield "data: " + json.dumps({"choices": [], "usage": usage}) + "\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return app


class Served:
    """A uvicorn server in a thread of its own, so a test can call the loadgen CLI (which runs its own loop)."""

    def __init__(self, app: FastAPI) -> None:
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return f"http://127.0.0.1:{self.server.servers[0].sockets[0].getsockname()[1]}"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join()


def planned(n: int, gap_s: float = 0.0, max_tokens: int = 5) -> list[PlannedRequest]:
    return [PlannedRequest(f"r{i}", "hello", max_tokens, i * gap_s) for i in range(n)]


def test_a_server_failing_5_percent_of_requests_is_reported_with_those_requests_failed():
    with Served(stub_app(fail_every=20)) as url:
        results, interrupted = asyncio.run(replay(planned(100), url=url + "/v1/completions", model="stub",
                                                  chat=False, max_concurrency=20))
    report = build_report(results, slo=Slo(ttft_ms=1000))
    assert not interrupted and report.num_sent == 100
    assert report.failures == {"http 500: boom": 5} and report.num_completed == 95
    assert report.summary.num_requests == 95 and report.summary.output_throughput > 0
    assert report.attainment_all == pytest.approx(0.95 * report.summary.slo_attainment)
    assert all(r.num_output_tokens == 5 and len(r.itls_s) == 4 for r in results if r.ok)


def test_a_request_past_its_timeout_counts_as_failed_not_lost():
    with Served(stub_app(hang=True)) as url:
        results, _ = asyncio.run(replay(planned(3), url=url + "/v1/completions", model="stub", chat=False,
                                        timeout_s=0.3))
    assert [r.error for r in results] == ["timeout"] * 3


def test_a_stopped_replay_marks_the_unfinished_requests_interrupted():
    async def scenario(url):
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.3, stop.set)
        return await replay(planned(40, gap_s=0.02), url=url + "/v1/completions", model="stub", chat=False,
                            stop=stop)

    with Served(stub_app()) as url:
        results, interrupted = asyncio.run(scenario(url))
    report = build_report(results, slo=Slo(), interrupted=interrupted)
    assert interrupted and 0 < report.num_completed < 40
    assert report.num_sent + report.num_not_sent == 40 and report.num_not_sent > 0
    assert report.num_failed == report.num_sent - report.num_completed
    assert set(report.failures) <= {"interrupted"}


def test_requests_an_interrupt_stopped_before_sending_are_not_counted_as_sent_or_failed():
    """Three requests hang in flight, the other seven were due later: an interrupt makes the three failures and
    the seven "not sent", outside every sent figure; and asyncio reports no unretrieved CancelledError."""

    async def scenario(url):
        loop = asyncio.get_running_loop()
        unretrieved = []
        loop.set_exception_handler(lambda _loop, context: unretrieved.append(context["message"]))
        stop = asyncio.Event()
        loop.call_later(0.5, stop.set)
        out = await replay(planned(10, gap_s=0.2), url=url + "/v1/completions", model="stub", chat=False,
                           stop=stop)
        gc.collect()  # a future's never-retrieved exception is reported when the future is collected
        return out, unretrieved

    with Served(stub_app(hang=True)) as url:
        (results, interrupted), unretrieved = asyncio.run(scenario(url))
    report = build_report(results, slo=Slo(ttft_ms=1000), interrupted=interrupted)
    assert interrupted and unretrieved == []
    assert 1 <= report.num_sent <= 3 and report.num_not_sent == 10 - report.num_sent
    # those the interrupt cut off are neither the server's failures nor its misses
    assert report.failures == {"interrupted": report.num_sent} and math.isnan(report.attainment_all)
    assert report.num_cut_off == report.num_sent
    assert [r.error for r in results[report.num_sent:]] == ["not sent"] * report.num_not_sent
    table = markdown(report, {})
    assert f"| completed / failed | 0 / {report.num_sent} |" in table
    assert f"| not sent (interrupted first; in no figure here) | {report.num_not_sent} |" in table


def test_a_request_cut_off_mid_reply_keeps_the_chunks_it_got_and_leaves_attainment_alone():
    """An outside tester's Ctrl-C counted requests already past their first token as 0 tokens and as SLO misses
    (all-sent attainment 3.0 % fell to 1.9 %)."""

    async def scenario(url):
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.6, stop.set)
        fast = [PlannedRequest("quick", "hello", 2, 0.0)]
        slow = [PlannedRequest("slow", "hello", 50, 0.0)]
        return await replay(fast + slow, url=url + "/v1/completions", model="stub", chat=False, stop=stop)

    with Served(stub_app(chunk_gap_s=0.1)) as url:
        results, interrupted = asyncio.run(scenario(url))
    quick, slow = results
    assert interrupted and quick.ok and not slow.ok and slow.error == "interrupted"
    assert slow.ttft_s is not None and 2 <= slow.num_output_tokens < 50  # the chunks it got before the stop
    # its outcome known when it was cut: its first token in time, and nothing else asked of it
    report = build_report(results, slo=Slo(ttft_ms=1000), interrupted=True)
    assert report.attainment_all == 1.0 and report.num_cut_off == 0
    # not known where its end is judged too: left out, and the table says so
    report = build_report(results, slo=Slo(ttft_ms=1000, e2el_ms=60_000), interrupted=True)
    assert report.attainment_all == 1.0 and report.num_cut_off == 1
    assert ("(all sent, failures as misses; 1 the interrupt cut off before their outcome was known left out) | "
            "100.0% |") in markdown(report, {})
    # a target already missed when it was cut counts as the miss it is (all left out, the figure read high)
    report = build_report(results, slo=Slo(ttft_ms=1000, e2el_ms=300), interrupted=True)
    assert report.num_cut_off == 0 and report.attainment_all == 0.5
    # nothing completed: the table still says the attainment its JSON has (an outside tester's run showed none)
    report = build_report([slow], slo=Slo(ttft_ms=1000), interrupted=True)
    assert report.summary is None and report.attainment_all == 1.0
    assert "| SLO attainment (all sent, failures as misses) | 100.0% |" in markdown(report, {})
    unknown = build_report([slow], slo=Slo(ttft_ms=1000, e2el_ms=60_000), interrupted=True)
    assert math.isnan(unknown.attainment_all) and "SLO attainment" not in markdown(unknown, {})


@pytest.mark.parametrize("event", [{"error": {"message": "engine died", "code": 500}},
                                   {"object": "error", "message": "engine died", "type": "InternalError"}])
def test_an_error_event_in_the_stream_fails_the_request_with_its_message(event):
    with Served(stub_app(error_event=event)) as url:
        results, _ = asyncio.run(replay(planned(3), url=url + "/v1/completions", model="stub", chat=False))
    report = build_report(results, slo=Slo())
    assert report.num_completed == 0 and report.failures == {"server error: engine died": 3}


def test_speedup_reports_latencies_in_the_servers_seconds():
    with Served(stub_app()) as url:
        results, _ = asyncio.run(replay(planned(4, max_tokens=3), url=url + "/v1/completions", model="stub",
                                        chat=False))
    plain = build_report(results, slo=Slo())
    fast = build_report(results, slo=Slo(), speedup=10.0)
    assert fast.summary.ttft_ms.mean == pytest.approx(10 * plain.summary.ttft_ms.mean)
    assert fast.summary.request_throughput == pytest.approx(plain.summary.request_throughput / 10)


def test_the_command_line_writes_json_and_markdown_with_vllm_named_flags(tmp_path, capsys):
    with Served(stub_app(fail_every=20)) as url:
        code = main(["loadgen", "--base-url", url, "--dataset-name", "random", "--random-input-len", "4",
                     "--random-output-len", "3", "--num-prompts", "40", "--request-rate", "400", "--burstiness",
                     "0.5", "--max-concurrency", "8", "--goodput", "ttft:500", "tpot:50", "--metric-percentiles",
                     "95", "--save-result", "--result-dir", str(tmp_path), "--result-filename", "run.json",
                     "--disable-tqdm"])
    assert code == 0
    data = json.loads((tmp_path / "run.json").read_text(), parse_constant=_refuse)  # standard JSON: no NaN
    assert (data["completed"], data["failed"], data["failures"]) == (38, 2, {"http 500: boom": 2})
    assert not {"max_wait_s", "long_wait_p999_s", "num_preemptions"} & set(data)  # the engine's, not a client's
    assert data["model"] == "stub" and data["arrival_process"] == "gamma" and data["slo"] == {"ttft": 500, "tpot": 50}
    assert math.isfinite(data["ttft_ms"]["p99"]) and "p95" in data["percentiles_ms"]["ttft"]
    assert len(data["requests"]) == 40 and data["requests_time_unit"].startswith("wall seconds")
    # each request's gaps between chunks, so that ITL can be recomputed afterwards (vLLM's bench keeps them too)
    assert all(len(r["itls_s"]) == r["num_output_tokens"] - 1 for r in data["requests"] if r["ok"])
    assert "| failed: http 500: boom | 2 |" in (tmp_path / "run.md").read_text()
    assert "SLO attainment" in capsys.readouterr().out


def test_a_client_ttft_far_above_the_servers_own_is_called_out(tmp_path, capsys):
    argv = ["--random-input-len", "4", "--random-output-len", "3", "--num-prompts", "20", "--request-rate", "inf",
            "--speedup", "100", "--save-result", "--result-dir", str(tmp_path), "--disable-tqdm"]
    with Served(stub_app(server_ttft_s=0.0001)) as url:  # the server: 0.1 ms; the client, x100: several ms more
        assert main(["loadgen", "--base-url", url, "--dataset-name", "random", *argv,
                     "--result-filename", "far.json"]) == 0
    err = capsys.readouterr().err
    assert "note: the server's /metrics put these requests' mean TTFT at 0.1 ms" in err and "lower --speedup" in err
    saved = json.loads((tmp_path / "far.json").read_text())
    assert saved["server_mean_ttft_ms"] == pytest.approx(0.1)
    # the saved result says it too: an outside tester's saved run read as the engine's latency without the note
    said = next(line for line in err.splitlines() if line.startswith("note: the server's /metrics"))
    assert said in saved["notes"] and said in (tmp_path / "far.md").read_text()
    with Served(stub_app()) as url:  # no /metrics (a gateway in front): nothing to compare, and it says so
        assert main(["loadgen", "--base-url", url, "--dataset-name", "random", *argv,
                     "--result-filename", "none.json"]) == 0
    err = capsys.readouterr().err
    assert "/metrics has no vLLM TTFT histogram" in err and "mean TTFT at" not in err
    assert json.loads((tmp_path / "none.json").read_text())["server_mean_ttft_ms"] is None


def _refuse(constant: str) -> None:
    raise ValueError(f"{constant} is not standard JSON")


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse refuses a bad value before the command runs
        return exc.code if isinstance(exc.code, int) else 1


def _loadgen(url: str, *extra: str) -> list[str]:
    return ["loadgen", "--base-url", url, "--dataset-name", "random", "--random-input-len", "4",
            "--random-output-len", "3", "--num-prompts", "3", "--disable-tqdm", *extra]


@pytest.mark.parametrize("argv, message", [
    (["--metric-percentiles", "abc"], "--metric-percentiles 'abc': expected comma-separated percentiles in [0, 100]"),
    (["--metric-percentiles", "95,150"], "--metric-percentiles '95,150'"),
    (["--metric-percentiles", "-5"], "--metric-percentiles '-5'"),
    (["--metric-percentiles", "nan"], "--metric-percentiles 'nan'"),
    (["--base-url", "not-a-url"], "--base-url 'not-a-url': expected http://HOST[:PORT]"),
    (["--base-url", "ftp://127.0.0.1:21"], "--base-url 'ftp://127.0.0.1:21'"),
    (["--base-url", "http://127.0.0.1:8000/v1"], "give the server's root without /v1"),
    (["--request-rate", "abc"], "--request-rate 'abc': expected requests per second > 0, or inf"),
    (["--goodput", "ttft:-5"], "--goodput 'ttft:-5': ttft needs milliseconds, a finite number > 0, e.g. ttft:1000"),
    (["--goodput", "ttft:500", "tpot:50", "ttft:900"], "--goodput names ttft more than once"),
])
def test_a_bad_flag_value_exits_2_before_any_request(argv, message, capsys):
    assert _exit_code(["loadgen", "--model", "m", "--num-prompts", "3", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_more_prompts_than_the_sharegpt_split_holds_exits_2_in_one_line(capsys):
    argv = ["loadgen", "--model", "m", "--num-prompts", "100000", "--sharegpt-split", "test"]
    assert _exit_code(argv) == 2  # was an uncaught WorkloadError (exit 1, a traceback)
    err = capsys.readouterr().err
    assert err.startswith("jevserve loadgen: error: --num-prompts 100000; the ShareGPT 'test' split has") and (
        "Traceback" not in err)


def test_a_run_in_which_no_request_completed_exits_1(capsys):
    with Served(stub_app(fail_every=1)) as url:
        assert main(_loadgen(url)) == 1
    captured = capsys.readouterr()
    assert "| failed: http 500: boom | 3 |" in captured.out  # the server's own message, not only its status
    assert "error: none of the 3 requests completed" in captured.err


def test_a_models_endpoint_answering_an_error_status_is_named_by_its_status(capsys):
    with Served(stub_app(models_status=500)) as url, pytest.raises(SystemExit) as exc:
        main(_loadgen(url))
    assert "/v1/models (HTTP 500); give --model" in str(exc.value.code)


@pytest.mark.parametrize("model", [[], ["--model", "m"]])
def test_a_server_whose_clock_runs_at_another_speedup_is_named_with_the_flag_to_give(model, capsys):
    with Served(stub_app(speedup=10.0)) as url:
        assert main(_loadgen(url, *model)) == 0
        err = capsys.readouterr().err
        assert "--speedup is 1, so every latency reported is 10 times too small; give --speedup 10" in err
        assert main(_loadgen(url, *model, "--speedup", "10")) == 0
        assert "warning" not in capsys.readouterr().err
    with Served(stub_app()) as url:  # a server that lists no speedup (vLLM): nothing to compare, nothing said
        assert main(_loadgen(url, *model)) == 0
        assert "warning" not in capsys.readouterr().err


def test_an_unwritable_result_dir_is_refused_before_the_run(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    app = stub_app()
    with Served(app) as url:
        assert main(_loadgen(url, "--save-result", "--result-dir", str(blocker / "out"))) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("jevserve loadgen: error:") and str(blocker) in captured.err
    assert app.state.posts == 0 and "completed / failed" not in captured.out  # refused before the run


def test_an_unknown_arrival_process_is_refused_naming_the_ones_there_are(capsys):
    assert _exit_code(["loadgen", "--model", "m", "--arrival-process", "weird"]) == 2
    assert "unknown arrival process 'weird'" in capsys.readouterr().err


def test_a_trace_file_is_replayed_at_its_own_times_with_its_lengths(tmp_path, capsys):
    """loadgen took only ShareGPT and random prompts, so a `sim run --workload trace.jsonl` prediction could not be
    checked against a live server (an outside tester's)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in [
        {"request_id": "a", "arrival_s": 10.0, "prompt_tokens": 5, "output_tokens": 3},
        {"request_id": "b", "arrival_s": 10.2, "prompt_tokens": 2, "output_tokens": 4},
        {"request_id": "c", "arrival_s": 10.4, "prompt_tokens": 7, "output_tokens": 2}]))
    app = stub_app()
    base = ["--dataset-name", "trace", "--dataset-path", str(trace), "--disable-tqdm"]
    with Served(app) as url:
        assert main(["loadgen", "--base-url", url, *base, "--arrival-process", "trace", "--save-result",
                     "--result-dir", str(tmp_path), "--result-filename", "run.json"]) == 0
        data = json.loads((tmp_path / "run.json").read_text())
        assert data["arrival_process"] == "trace" and data["request_rate"] == "the trace's"
        assert "(trace, at the trace's own send times, speedup 1.0)" in (tmp_path / "run.md").read_text()
        assert [r["request_id"] for r in data["requests"]] == ["a", "b", "c"]
        sent = [r["send_s"] for r in data["requests"]]
        assert sent[0] < 0.1 and sent[2] - sent[0] == pytest.approx(0.4, abs=0.1)  # its own gaps, from 0
        assert [len(b["prompt"].split()) for b in app.state.bodies] == [5, 2, 7]
        assert [b["max_tokens"] for b in app.state.bodies] == [3, 4, 2]
        capsys.readouterr()
        assert main(["loadgen", "--base-url", url, *base, "--request-rate", "50"]) == 0  # generated times instead
        assert "note: the trace's own send times are replaced by poisson arrivals at 50 req/s" in \
            capsys.readouterr().err


def test_a_trace_prompt_is_as_many_tokens_as_its_row_says_and_its_reply_fits_the_context(tmp_path):
    """"foxtrot" was three tokens, so a trace's prompts came out a quarter longer than its prompt_tokens and a
    34,000-token row that `sim run` serves was refused live (an outside re-tester's)."""
    from jevserve.loadgen.workload import trace_requests
    from jevserve.sim.workloads.tokens import load_tokenizer

    trace = tmp_path / "t.jsonl"
    rows = [{"request_id": f"r{n}", "arrival_s": n, "prompt_tokens": n, "output_tokens": 50}
            for n in (1, 2, 7, 513, 34_000)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items, _ = trace_requests(trace, seed=3, need_arrival=True, max_model_len=34_010)
    tokenizer = load_tokenizer()
    assert [len(tokenizer.encode(prompt, add_special_tokens=False).ids) for _, prompt, _, _ in items] == [
        1, 2, 7, 513, 34_000]
    assert [reply for *_, reply in items] == [50, 50, 50, 50, 10]  # cut where the context ends, as sim run cuts it
    bare = tmp_path / "bare.jsonl"
    bare.write_text('{"request_id": "a", "prompt_tokens": 3, "output_tokens": 2}\n')
    with pytest.raises(Exception, match="missing field 'arrival_s'"):  # trace arrivals need them, as sim run's do
        trace_requests(bare, seed=0, need_arrival=True)
    assert len(trace_requests(bare, seed=0)[0]) == 1


@pytest.mark.parametrize(("argv", "said"), [
    (["--dataset-name", "trace"], "--dataset-name trace needs --dataset-path FILE"),
    (["--dataset-name", "trace", "--dataset-path", "t.jsonl", "--num-prompts", "5"], "--num-prompts would be ignored"),
    (["--dataset-name", "trace", "--dataset-path", "t.jsonl", "--arrival-process", "trace", "--request-rate", "5"],
     "--request-rate would be ignored"),
    (["--arrival-process", "trace"], "--dataset-name sharegpt has no send times"),
    (["--dataset-path", "t.jsonl"], "--dataset-path would be ignored"),
    (["--random-input-len", "5"], "--random-input-len would be ignored"),
])
def test_trace_flags_that_cannot_apply_are_refused(argv, said, capsys):
    assert _exit_code(["loadgen", "--model", "m", *argv]) == 2
    assert said in capsys.readouterr().err


def test_a_result_dir_under_a_file_says_so_in_the_commands_words(tmp_path, capsys):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    assert _exit_code(["loadgen", "--model", "m", "--save-result", "--result-dir", str(a_file)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jevserve loadgen: error: --result-dir") and f"{a_file} is a file, not a folder" in err


def test_a_speedup_mismatch_is_named_as_such_in_both_directions_and_not_blamed_on_the_host():
    # an outside tester's engine ran at speedup 1 and loadgen at 10: the warning said latencies were "off by 0.1
    # times" (they were 10 times too large) and the closing note blamed HTTP and the client for the gap
    from jevserve.loadgen.server_metrics import disagreement, speedup_error

    assert speedup_error(10.0, 1.0) == "10 times too large" and speedup_error(1.0, 10.0) == "10 times too small"
    note = disagreement(56368.3, 5633.0, 0.0, 10.0, server_speedup=1.0)
    assert "every latency above is 10 times too large: rerun with --speedup 1" in note and "HTTP" not in note


def test_the_client_server_note_names_the_host_only_when_the_engine_fell_behind():
    from jevserve.loadgen.server_metrics import disagreement

    kept = disagreement(300.0, 10.0, 0.0, 10.0)
    assert "the engine kept its clock" in kept and "too slow" not in kept
    behind = disagreement(300.0, 10.0, 2.5, 10.0)
    assert "a host too slow to keep the engine's clock" in behind and "2.50 s of engine time late" in behind


SECOND_CTRL_C_S = 0.01  # inside the window in which the replay had ended and the result was not yet written


def test_two_quick_ctrl_cs_still_write_the_partial_result(tmp_path):
    # an outside tester's second SIGINT 5-50 ms after the first (a wrapper passing the terminal's on) lost the
    # partial result: every press until it is written is taken
    import signal
    import subprocess
    import sys

    app = stub_app(hang=True, server_ttft_s=0.01)  # with /metrics, read again after the replay, as an engine's
    with Served(app) as url:
        proc = subprocess.Popen([sys.executable, "-m", "jevserve.cli", *_loadgen(url, "--num-prompts", "200",
                                 "--request-rate", "20", "--save-result", "--result-dir", str(tmp_path),
                                 "--result-filename", "cut.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            for _ in range(3000):  # until the replay has sent something
                if app.state.posts >= 2:
                    break
                time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
            time.sleep(SECOND_CTRL_C_S)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    # 130, or killed by the second SIGINT when it came after the result was written and the command had returned
    assert proc.returncode in (130, -signal.SIGINT), err
    data = json.loads((tmp_path / "cut.json").read_text())
    assert data["interrupted"] is True and len(data["requests"]) == 200 and (tmp_path / "cut.md").exists()
    assert "(interrupted: partial)" in err and "Traceback" not in err


def test_a_failure_in_fastapis_detail_shape_keeps_its_message(capsys):
    with Served(stub_app()) as url:
        assert main(_loadgen(url, "--endpoint", "/v1/nope")) == 1
    assert "| failed: http 404: Not Found | 3 |" in capsys.readouterr().out


def test_failures_that_differ_only_in_their_numbers_are_one_reason():
    from jevserve.loadgen.report import failure_reason

    # one row per request was printed when each message carried its own token count
    reasons = {failure_reason(f"http 400: the request has {n} tokens, over the 40,960 the model takes")
               for n in (62609, 62817, 1234)}
    assert reasons == {"http 400: the request has # tokens, over the # the model takes"}
    assert failure_reason("http 500") == "http 500" and failure_reason("timeout") == "timeout"
    # a number inside a name is left alone: the served name is what the reader needs (it read `Qwen/Qwen#-#B`)
    assert (failure_reason("http 404: the model `nope` does not exist; this engine serves `Qwen/Qwen3-8B`")
            == "http 404: the model `nope` does not exist; this engine serves `Qwen/Qwen3-8B`")
    assert failure_reason(None) == "unknown"


def _served_one_at_a_time(rate_rps: float, service_s: float, n: int = 400) -> list[RequestResult]:
    """A server answering one request at a time in `service_s`, sent `rate_rps` requests a second."""
    results, free_at = [], 0.0
    for i in range(n):
        send = i / rate_rps
        start = max(send, free_at)
        free_at = start + service_s
        results.append(RequestResult(f"r{i}", send, sent=True, ok=True, ttft_s=start - send + service_s / 2,
                                     e2el_s=free_at - send, num_output_tokens=5, planned_s=send,
                                     ended_s=free_at - send))
    return results


def test_a_server_that_falls_behind_the_offered_load_is_said_to_and_one_that_keeps_up_is_not():
    # above a server's capacity loadgen printed plausible figures and exited 0 with no word, at 20 req/s against a
    # bound of 3.2 as at 3.5 (an outside tester's); the simulator's steady-state test is run on the replay
    from jevserve.loadgen.report import keeps_up_note

    behind = build_report(_served_one_at_a_time(10, 0.2), slo=Slo(ttft_ms=1000))
    assert behind.steady is not None and behind.steady.keeps_up is False
    assert "| keeps up (steady state) | no: completions " in markdown(behind, {"slo": {"ttft": 1000}})
    assert keeps_up_note(behind).startswith("warning: the backlog grew, in the server: the offered load")
    kept = build_report(_served_one_at_a_time(2, 0.2), slo=Slo(ttft_ms=1000))
    assert kept.steady.keeps_up is True and keeps_up_note(kept) is None
    assert "| keeps up (steady state) | yes |" in markdown(kept, {"slo": {"ttft": 1000}})
    short = build_report(_served_one_at_a_time(2, 0.2, n=8), slo=Slo(ttft_ms=1000))
    assert short.steady.keeps_up is None and "too short to tell" in keeps_up_note(short)
    assert "(--num-prompts, more than 8)" in keeps_up_note(short)


def test_the_table_names_its_slo_and_the_clock_its_times_are_in():
    # "duration (s) 232.68" for a run of 119 s at --speedup 2, and attainment with no word of the SLO it counts
    report = build_report(_served_one_at_a_time(2, 0.2, n=20), slo=Slo(ttft_ms=500, tpot_ms=50), speedup=2.0)
    table = markdown(report, {"speedup": 2.0, "slo": {"ttft": 500, "tpot": 50}})
    assert "| SLO (attainment and goodput) | ttft ≤ 500 ms and tpot ≤ 50 ms |" in table
    assert "| duration (engine s) |" in table and "the wall clock's times the speedup" in table
    assert "| duration (s) |" in markdown(report, {"speedup": 1, "slo": {"ttft": 500}})


def test_a_server_that_is_not_there_is_said_so_not_told_to_give_a_model():
    # "cannot read the model … give --model": with --model every request then failed the same way
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(SystemExit) as exc:
        main(["loadgen", "--port", str(port), "--num-prompts", "2", "--disable-tqdm"])
    said = str(exc.value.code)
    assert f"nothing answers at http://127.0.0.1:{port}" in said and "is the server running there?" in said
    assert "give --model" not in said


def test_the_steady_verdict_sees_a_closed_loops_queue_and_is_not_fooled_by_errors_or_a_cut_off_run():
    # an outside tester's closed loop at 2.5 times a server's capacity (--max-concurrency 2) was said to keep up,
    # timed from the sends; a fast server failing one request in ten "fell behind" (a failure waited for ever); one
    # failed or cut-off request made any run "too short to tell" ("about inf requests in flight")
    from jevserve.loadgen.report import keeps_up_note

    closed = _served_one_at_a_time(10, 0.2)
    for r in closed:  # sent when the one slot came free, due at 10 req/s
        r.planned_s, r.send_s = r.send_s, r.send_s + r.e2el_s - 0.2
        r.e2el_s, r.ttft_s, r.ended_s = 0.2, 0.1, 0.2
    report = build_report(closed, slo=Slo(ttft_ms=1000))
    assert report.steady.keeps_up is False
    assert "behind --max-concurrency" in keeps_up_note(report, max_concurrency=1)
    erring = _served_one_at_a_time(2, 0.2)
    for r in erring[::10]:  # answered at once with a 500
        r.ok, r.error, r.ttft_s, r.e2el_s, r.ended_s = False, "http 500", None, None, 0.01
    erring[-1].ok, erring[-1].error, erring[-1].ended_s = False, "interrupted", None  # cut off by Ctrl-C
    steady = build_report(erring, slo=Slo(ttft_ms=1000)).steady
    assert steady.keeps_up is True and steady.too_short is None
    burst = build_report(_served_one_at_a_time(2, 0.2), slo=Slo(ttft_ms=1000), judge_steady=False)
    assert burst.steady is None and "not judged: every request sent at once" in markdown(burst, {"request_rate": "inf"})


def test_inter_token_gaps_below_the_time_per_token_are_said_to_be_the_clients_not_the_servers():
    """At --speedup 5 an outside tester's ITL p50 read 1.1 ms against engine steps of 4.0 ms, with no word: chunks
    that reach the client together give gaps no server step has."""
    from jevserve.loadgen.report import clumped_itl_note

    def result(i: int, gaps: list[float]) -> RequestResult:  # 10 tokens over 0.036 s after the first
        return RequestResult(f"r{i}", i * 1.0, sent=True, ok=True, ttft_s=0.01, e2el_s=0.046, itls_s=gaps,
                             num_output_tokens=10, planned_s=i * 1.0, ended_s=0.046)

    clumped = [result(i, [0.0001] * 5 + [0.009] * 4) for i in range(20)]  # pairs of chunks arriving together
    even = [result(i, [0.004] * 9) for i in range(20)]
    slo = Slo(1000.0)
    note = clumped_itl_note(build_report(clumped, slo=slo, speedup=5.0), 5.0)
    assert note is not None and "ITL p50 0.5 ms is under half of TPOT p50 20.0 ms" in note and "--speedup 5" in note
    assert clumped_itl_note(build_report(even, slo=slo, speedup=5.0), 5.0) is None


def test_a_trace_prompt_past_the_servers_context_names_the_server_not_a_flag_loadgen_lacks(tmp_path):
    # an outside tester was told to "raise --max-model-len", the engine's flag: loadgen reads the server's context
    from jevserve.loadgen.workload import trace_requests
    from jevserve.sim.errors import WorkloadError

    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"request_id": "big", "arrival_s": 0, "prompt_tokens": 100, "output_tokens": 5}))
    with pytest.raises(WorkloadError, match=r"max_model_len=50 .*GET /v1/models") as refused:
        trace_requests(trace, seed=0, need_arrival=True, max_model_len=50)
    assert "--max-model-len" not in str(refused.value)


def test_a_server_that_refuses_much_of_the_offered_load_is_not_said_to_keep_up():
    # an outside tester's engine (--max-num-waiting 1) refused 325 of 400 requests with 429 and loadgen said "keeps up
    # (steady state): yes": a refused request leaves the queue at once, so the queue test saw no backlog
    from jevserve.loadgen.report import keeps_up_note, report_dict

    refusing = _served_one_at_a_time(2, 0.2)
    for r in refusing[1::2]:  # every other one refused at once for load
        r.ok, r.error, r.ttft_s, r.e2el_s, r.ended_s = False, "http 429: 1 requests waiting", None, None, 0.01
    report = build_report(refusing, slo=Slo(ttft_ms=1000))
    assert report.steady.keeps_up is False and report.refused_share == pytest.approx(0.5, abs=0.05)
    assert "| keeps up (steady state) | no: 5" in markdown(report, {"slo": {"ttft": 1000}})
    assert "refused for load (429, 503)" in markdown(report, {"slo": {"ttft": 1000}})
    assert keeps_up_note(report).startswith("warning: the server refused 5")
    assert report_dict(report, {})["keeps_up"] is False
    few = _served_one_at_a_time(2, 0.2)
    few[-3].ok, few[-3].error, few[-3].ended_s = False, "http 429: busy", 0.01  # one refusal in a hundred: within
    assert build_report(few, slo=Slo(ttft_ms=1000)).steady.keeps_up is True
