"""`jevserve extproc`: the command as a user runs it (a process, its health, one request, SIGTERM) and its errors."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time

import grpc
import httpx
import pytest
import yaml
from envoy.config.bootstrap.v3 import bootstrap_pb2
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

import tests.gateway.extproc.test_deploy_docs  # noqa: F401 (registers the Any types of the bootstrap)
from jevserve.cli import main
from jevserve.gateway.extproc import ExtProcServer
from tests.gateway.extproc.envoy import EnvoyStream, Forwarded
from tests.gateway.extproc.live import free_port
from tests.gateway.extproc.scripted import Scripted, serving_at

CONFIG = {
    "decider": "remote:http://127.0.0.1:9",  # nothing answers there: every decision takes its fallback
    "decision_timeout_ms": 200,
    "upstreams": [
        {"name": "large", "url": "http://10.0.0.5:8000/v1", "kind": "vllm"},
        {"name": "small", "url": "http://vllm-small.default.svc:8001/v1"},
    ],
    "routes": [
        {
            "model": "qwen3",
            "upstream_model": "qwen3-8b",
            "upstreams": ["large"],
            "guard": {"fallback": "open"},
            "route": {"targets": [{"model": "qwen3-0.6b", "cost": 0.1, "upstreams": ["small"]}, {"model": "qwen3-8b"}]},
        }
    ],
}


def write_config(tmp_path, data=CONFIG):
    path = tmp_path / "gw.yaml"
    path.write_text(json.dumps(data))
    return path


def test_print_envoy_gives_a_bootstrap_routing_each_model_to_its_upstream(tmp_path, capsys) -> None:
    assert main(["extproc", "--config", str(write_config(tmp_path)), "--port", "9100", "--print-envoy"]) == 0
    bootstrap = yaml.safe_load(capsys.readouterr().out)
    json_format.ParseDict(bootstrap, bootstrap_pb2.Bootstrap())  # every field known to the descriptors
    clusters = {c["name"]: c for c in bootstrap["static_resources"]["clusters"]}
    address = clusters["small"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
    assert address["socket_address"] == {"address": "vllm-small.default.svc", "port_value": 8001}
    assert clusters["jevserve"]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"][
        "socket_address"] == {"address": "127.0.0.1", "port_value": 9100}
    routes = bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
        "route_config"]["virtual_hosts"][0]["routes"]
    assert routes[-1]["route"]["cluster"] == "large"  # the route's own upstream (one cluster each) takes the rest


def test_print_envoy_without_upstreams_says_what_is_missing(tmp_path, capsys) -> None:
    path = write_config(tmp_path, {"routes": [{"model": "m"}]})
    assert main(["extproc", "--config", str(path), "--print-envoy"]) == 2
    assert "declares no upstreams" in capsys.readouterr().err


def test_bad_port_and_bad_config_are_refused(tmp_path, capsys) -> None:
    assert main(["extproc", "--port", "70000"]) == 2
    assert "--port 70000" in capsys.readouterr().err
    with socket.socket() as taken:  # the metrics port, not the gRPC one, is named when it is the one taken
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        metrics_port = taken.getsockname()[1]
        assert main(["extproc", "--port", str(free_port()), "--metrics-port", str(metrics_port)]) == 2
    err = capsys.readouterr().err
    assert f"--metrics-port {metrics_port}: cannot bind" in err and "Traceback" not in err
    for deadline in ("nan", "inf", "0", "-5"):  # NaN would let every request past its decisions
        with pytest.raises(SystemExit) as exited:
            main(["extproc", "--deadline-ms", deadline])
        assert exited.value.code == 2
        assert f"--deadline-ms {deadline!r}: expected a finite number > 0" in capsys.readouterr().err
    path = write_config(tmp_path, {"routes": [{"model": "m", "guard": {"threshold": 3}}]})
    assert main(["extproc", "--config", str(path)]) == 2
    assert "routes[0].guard.threshold" in capsys.readouterr().err


def test_the_command_serves_health_and_requests_then_stops_on_sigterm(tmp_path) -> None:
    port, metrics_port = free_port(), free_port()
    # a deadline far above the decisions' (200 ms + 500 by default): on a loaded 2-core machine the first request's
    # decisions took longer, the exchange failed open as it should, and the stream ended before the reply's phase
    # and a decision timeout far above a refused connection's: at 200 ms a loaded machine ran past it now and then,
    # and the request was refused undecided (429, on_decision_timeout: reject) instead of taking the fallbacks
    config = write_config(tmp_path, {**CONFIG, "decision_timeout_ms": 5000})
    command = [sys.executable, "-m", "jevserve.cli", "extproc", "--config", str(config),
               "--port", str(port), "--metrics-port", str(metrics_port), "--deadline-ms", "10000"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = proc.stdout.readline()
        assert f"jevserve extproc listening on 127.0.0.1:{port}" in banner, banner

        async def scenario():
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                ready = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service="readiness"), timeout=5
                )
                decider = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service="jevserve.decider"), timeout=5
                )
                body = {"model": "qwen3", "messages": [{"role": "user", "content": "hello"}]}
                stream = EnvoyStream(channel, "FULL_DUPLEX_STREAMED")
                got = await stream.request(json.dumps(body).encode())
                assert isinstance(got, Forwarded), got  # not answered by the decisions side
                await stream.respond(200, {"content-type": "application/json"}, [b'{"choices": []}'])
                await stream.finish()
                await asyncio.sleep(0.2)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{metrics_port}") as http:
                metrics, health = await http.get("/metrics"), await http.get("/healthz")
            return ready.status, decider.status, got, metrics, health

        status, decider_status, got, metrics, health = asyncio.run(scenario())
        # still serving (by the fallbacks), and saying why: the decider at 127.0.0.1:9 answers nothing
        assert health.status_code == 200 and health.json()["status"] == "degraded"
        assert "remote:http://127.0.0.1:9" in health.json()["decider_problem"]
        # and names the decider and the store, as the HTTP gateway's does (an outside tester's frozen Redis showed
        # nowhere on extproc's)
        assert health.json()["decider"] == "remote:http://127.0.0.1:9" and health.json()["store"] == "memory"
        assert 'jevserve_gateway_requests_total{endpoint="chat",model="qwen3",status="200"} 1.0' in metrics.text
        assert status == health_pb2.HealthCheckResponse.SERVING  # ready: the fallbacks answer every request
        assert decider_status == health_pb2.HealthCheckResponse.NOT_SERVING  # and the decider's own service says so
        # the decider is unreachable: guard falls back open, route falls back to the route's own model
        assert isinstance(got, Forwarded) and json.loads(got.body)["model"] == "qwen3-8b"
        decisions = got.headers["x-jevserve-decisions"]
        assert "guard=allow" in decisions and "!fallback" in decisions
        proc.send_signal(signal.SIGTERM)

        async def readiness_while_stopping():
            await asyncio.sleep(0.5)  # inside the announced window: still answering, no longer ready
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                answer = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service="readiness"), timeout=5
                )
            return answer.status

        assert asyncio.run(readiness_while_stopping()) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert proc.wait(20) == 0
        assert "stopping" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_decider_that_cannot_resolve_operating_points_is_a_clear_error(capsys) -> None:
    # the default config sets guard, harm and clarify by target rate: scoring them needs the decider
    assert main(["extproc", "--decider", "remote:http://127.0.0.1:9", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "make the decider answer, or give a threshold" in err and "Traceback" not in err


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_an_envoy_port_out_of_range_is_refused_like_port(capsys, port: str) -> None:
    assert main(["extproc", "--envoy-port", port, "--print-envoy"]) == 2
    assert f"--envoy-port {port}: expected 1-65535" in capsys.readouterr().err


def test_a_second_server_on_a_taken_port_fails_to_bind_rather_than_share_it() -> None:
    # gRPC's SO_REUSEPORT would let both bind and split the traffic between two configs
    async def scenario():
        async with serving_at(Scripted()) as (_channel, port):
            second = ExtProcServer(Scripted())
            try:
                with pytest.raises(OSError, match="in use"):
                    await second.start(f"127.0.0.1:{port}")
            finally:
                if second.ready:  # it bound the taken port after all
                    await second.stop(grace_s=0)

    asyncio.run(scenario())


def test_an_address_that_cannot_be_bound_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    config = str(write_config(tmp_path))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["extproc", "--config", config, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"error: --host 127.0.0.1 --port {port}: cannot bind (" in err and "in use" in err
    assert "Traceback" not in err
    assert main(["extproc", "--config", config, "--host", "256.1.1.1", "--port", str(free_port())]) == 2
    err = capsys.readouterr().err
    assert "error: --host 256.1.1.1 --port" in err and "cannot bind (" in err and "Traceback" not in err


def test_a_taken_port_is_one_line_on_stderr_with_no_grpc_log_before_it(tmp_path) -> None:
    # gRPC's C core logs a failed bind to the process's stderr itself (capsys cannot see it): a process can
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "jevserve.cli", "extproc", "--config", str(write_config(tmp_path)),
                   "--port", str(port)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: --host 127.0.0.1 --port {port}: cannot bind (Address "
                                                "already in use)"]


def test_ctrl_c_exits_130_after_a_graceful_stop(tmp_path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "jevserve.cli", "extproc", "--config", str(write_config(tmp_path)),
               "--port", str(port), "--drain-s", "12"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        banner = proc.stdout.readline()
        assert f"jevserve extproc listening on 127.0.0.1:{port}" in banner, banner
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 130  # as `jevserve gateway`; SIGTERM (an orchestrated stop) exits 0
        out = proc.stdout.read()
        assert "stopping (not ready for 2 s, then open streams get 12 s)" in out and "Traceback" not in out
        # the decider at 127.0.0.1:9 answers nothing: said at start, since every decision falls back
        assert "WARNING: decider remote:http://127.0.0.1:9 does not answer" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_deadline_not_above_the_decision_timeout_is_warned_of_at_start():
    # an outside tester set --deadline-ms 400 under decision_timeout_ms 1000: with the decider hung, an injection
    # went upstream undecided (failed open) where the docs promise a 429 and nothing forwarded undecided
    from jevserve.gateway.extproc.cli import _short_deadline

    assert _short_deadline(1500, 1000, "open") is None  # the default: decision_timeout_ms + 500
    warning = _short_deadline(400, 1000, "open")
    assert warning.startswith("warning: --deadline-ms 400 is not above") and "undecided" in warning
    assert "503" in _short_deadline(1000, 1000, "closed")


def test_the_decider_health_service_follows_the_decider_within_a_poll() -> None:
    # an outside tester's gRPC `jevserve.decider` still read SERVING 5 s after /healthz read degraded: it was brought
    # up to date at the recheck interval only
    from jevserve.gateway.decider import FixedDecider
    from jevserve.gateway.extproc.cli import watch_decider

    decider = FixedDecider({})
    reports: list[tuple[float, str | None]] = []

    async def scenario():
        started = time.monotonic()

        async def report(problem):
            reports.append((time.monotonic() - started, problem))

        watcher = asyncio.create_task(watch_decider(decider, report, poll_s=0.05))
        await asyncio.sleep(0.2)
        decider.failed_at, decider.failure = time.time(), "connection refused"  # as a failed call marks it
        failed = time.monotonic() - started
        await asyncio.sleep(0.2)
        decider.answered_at = time.time()  # and as an answer clears it
        await asyncio.sleep(0.2)
        watcher.cancel()
        return failed

    failed = asyncio.run(scenario())
    assert [problem for _, problem in reports] == [None, "connection refused", None]  # changes only, each once
    assert reports[1][0] - failed < 0.15
