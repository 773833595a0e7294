"""The load generator against stub servers: failures counted by reason, timeouts, interruption, the report."""

import asyncio
import itertools
import json
import math
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from jevserve.cli import main
from jevserve.loadgen.report import build_report
from jevserve.loadgen.run import replay
from jevserve.loadgen.workload import PlannedRequest
from jevserve.sim.metrics import Slo


def stub_app(*, fail_every: int = 0, hang: bool = False) -> FastAPI:
    """Streams `max_tokens` one-word chunks, 1 ms apart; every `fail_every`-th request gets a 500."""
    app = FastAPI()
    counter = itertools.count(1)

    @app.get("/v1/models")
    async def models():
        return {"data": [{"id": "stub"}]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        if fail_every and next(counter) % fail_every == 0:
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)

        async def chunks():
            if hang:
                await asyncio.sleep(30)
            for _ in range(body["max_tokens"]):
                await asyncio.sleep(0.001)
                yield "data: " + json.dumps({"choices": [{"index": 0, "text": "w "}]}) + "\n\n"
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
    assert report.failures == {"http 500": 5} and report.num_completed == 95
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
    assert report.failures == {"interrupted": 40 - report.num_completed}


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
    data = json.loads((tmp_path / "run.json").read_text())
    assert (data["completed"], data["failed"], data["failures"]) == (38, 2, {"http 500": 2})
    assert data["model"] == "stub" and data["arrival_process"] == "gamma" and data["slo"] == {"ttft": 500, "tpot": 50}
    assert math.isfinite(data["ttft_ms"]["p99"]) and "p95" in data["percentiles_ms"]["ttft"]
    assert len(data["requests"]) == 40
    assert "| failed: http 500 | 2 |" in (tmp_path / "run.md").read_text()
    assert "SLO attainment" in capsys.readouterr().out
