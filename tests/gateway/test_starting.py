"""While the gateway is built (calibration scored), its port answers at once: 503 with Retry-After, /healthz
"starting"; then the built app answers, with its lifespan run; a failed build is reported, not hung on."""

from __future__ import annotations

import threading
import time

import httpx
import openai
import pytest
from fastapi import FastAPI

from jevserve.gateway.app import create_app
from jevserve.gateway.config import parse_config
from jevserve.gateway.errors import ConfigError
from jevserve.gateway.starting import StartingApp
from tests.gateway.upstreams import LoopbackServer, TextDecider


def _wait(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_requests_during_the_build_get_503_with_retry_after_then_the_gateway_answers():
    release = threading.Event()
    closed = []

    def build(progress):
        progress("scoring 1,626 calibration requests for jev-gateway/guard with some-model")
        assert release.wait(10)
        config = parse_config({"routes": [{"model": "m"}]})
        app = create_app(config, decider=TextDecider(lambda policy, state: 0.0))
        inner = app.router.lifespan_context

        def lifespan(app):  # the built app's own lifespan runs, and ends at shutdown
            class Recorded:
                async def __aenter__(self):
                    self.context = inner(app)
                    return await self.context.__aenter__()

                async def __aexit__(self, *exc):
                    closed.append(True)
                    return await self.context.__aexit__(*exc)

            return Recorded()

        app.router.lifespan_context = lifespan
        return app

    ready = []
    starting = StartingApp(build, on_ready=ready.append)
    with LoopbackServer(starting) as server:
        root = f"http://127.0.0.1:{server.port}"
        health = httpx.get(f"{root}/healthz", timeout=5)
        assert health.status_code == 503
        assert health.json()["status"] == "starting" and "scoring 1,626" in health.json()["detail"]
        chat = httpx.post(f"{root}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=5)
        assert chat.status_code == 503 and chat.headers["retry-after"] == "5"
        error = chat.json()["error"]
        assert error["code"] == "starting" and "scoring 1,626" in error["message"] and error["type"] == "api_error"
        # an OpenAI client sees a server error it may retry, with the reason in the message
        api = openai.OpenAI(base_url=server.base_url, api_key="sk-local", max_retries=0, timeout=5)
        with pytest.raises(openai.InternalServerError, match="the gateway is starting"):
            api.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert not ready
        release.set()
        _wait(lambda: bool(ready))
        assert httpx.get(f"{root}/healthz", timeout=5).json()["status"] == "ok"
        reply = api.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert "placeholder reply" in reply.choices[0].message.content
        assert not closed
    assert closed == [True]


def test_a_failed_build_is_reported_and_answered_not_hung_on():
    failures = []

    def build(progress):
        progress("scoring calibration requests")
        raise ConfigError("routes: m.guard.max_false_action_rate: scoring the calibration requests failed")

    starting = StartingApp(build, on_failure=failures.append)
    with LoopbackServer(starting) as server:
        _wait(lambda: bool(failures))
        assert isinstance(failures[0], ConfigError)
        root = f"http://127.0.0.1:{server.port}"
        health = httpx.get(f"{root}/healthz", timeout=5)
        assert health.status_code == 503 and health.json()["status"] == "failed"
        chat = httpx.post(f"{root}/v1/chat/completions", json={}, timeout=5)
        assert chat.status_code == 503 and chat.json()["error"]["code"] == "start_failed"
        assert "scoring the calibration requests failed" in chat.json()["error"]["message"]


def test_an_app_built_at_once_answers_every_path_as_itself():
    app = FastAPI()

    @app.get("/hello")
    async def hello() -> dict:
        return {"hello": "world"}

    ready = []
    with LoopbackServer(StartingApp(lambda progress: app, on_ready=ready.append)) as server:
        _wait(lambda: bool(ready))
        assert httpx.get(f"http://127.0.0.1:{server.port}/hello", timeout=5).json() == {"hello": "world"}
        assert httpx.get(f"http://127.0.0.1:{server.port}/nowhere", timeout=5).status_code == 404
