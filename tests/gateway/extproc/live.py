"""A live Envoy for tests: docs/deploy.md's bootstrap pointed at loopback ports, run as a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml
from aiohttp import web

from jevserve.gateway.extproc.envoy_config import envoy_bootstrap
from tests.gateway.extproc.deploy_examples import DOC_DEFAULT_MODEL


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bootstrap_for(*, listen_port: int, extproc_port: int, upstream_ports: dict[str, int], mode: str) -> dict:
    """docs/deploy.md's bootstrap (test_deploy_docs checks they are the same) on loopback ports, in body `mode`."""
    models = {name: ("127.0.0.1", port) for name, port in upstream_ports.items()}
    return envoy_bootstrap(
        models,
        DOC_DEFAULT_MODEL,
        listen=("127.0.0.1", listen_port),
        extproc=("127.0.0.1", extproc_port),
        request_body_mode=mode,
        response_body_mode=mode,
    )


@contextlib.asynccontextmanager
async def running_envoy(envoy: Path, config: dict, listen_port: int) -> AsyncIterator[str]:
    """Envoy serving `config`; yields its base URL once the listener answers."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "envoy.yaml"
        path.write_text(yaml.safe_dump(config))
        command = [str(envoy), "-c", str(path), "--concurrency", "1", "--use-dynamic-base-id", "-l", "error"]
        log = open(Path(folder) / "envoy.log", "w")  # noqa: SIM115 (closed below, after the process)
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
        try:
            base = f"http://127.0.0.1:{listen_port}"
            async with httpx.AsyncClient(timeout=1.0) as client:
                for _ in range(200):
                    if process.poll() is not None:
                        raise RuntimeError(f"envoy exited: {(Path(folder) / 'envoy.log').read_text()[-2000:]}")
                    try:
                        await client.get(f"{base}/ready-probe")
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.05)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
            log.close()


@dataclass
class StubModel:
    """An OpenAI-compatible model server on a loopback port that records what reaches it."""

    name: str
    received: list[tuple[dict[str, str], dict]] = field(default_factory=list)
    ignores_stream: bool = False  # answers with events even when asked for one JSON reply (`stream: false`)
    streams_call: bool = False  # a streamed reply says a few words, then proposes a call (`sh`) in two pieces

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()  # fails (400) if Envoy's forwarded body does not match its content-length
        self.received.append((dict(request.headers), body))
        if body.get("stream") or self.ignores_stream:
            response = web.StreamResponse(headers={"content-type": "text/event-stream"})
            await response.prepare(request)
            deltas: list[tuple[dict, str | None]] = [({"content": w}, None) for w in ["Hello", " from ", self.name]]
            if self.streams_call:
                call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "sh", "arguments": ""}}
                rest = {"index": 0, "function": {"arguments": '{"cmd": "rm -rf /"}'}}
                deltas = [({"content": "Running it."}, None), ({"tool_calls": [call]}, None),
                          ({"tool_calls": [rest]}, None), ({}, "tool_calls")]
            for delta, finish in deltas:
                chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
                chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
                await asyncio.sleep(0.01)
            await response.write(b"data: [DONE]\n\n")
            return response
        message: dict = {"role": "assistant", "content": f"Hello from {self.name}"}
        finish = "stop"
        if body.get("tools"):
            call = {"id": "call_1", "type": "function", "function": {"name": "delete_repo", "arguments": "{}"}}
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        completion = {"id": "c", "object": "chat.completion", "created": 1, "model": body["model"]}
        completion["choices"] = [{"index": 0, "message": message, "finish_reason": finish}]
        return web.json_response(completion)

    async def probe(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True})


@contextlib.asynccontextmanager
async def running_models(*names: str) -> AsyncIterator[tuple[dict[str, StubModel], dict[str, int]]]:
    """Stub model servers by name, with their ports."""
    models, ports, runners = {}, {}, []
    for name in names:
        model = StubModel(name)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", model.chat)
        app.router.add_get("/ready-probe", model.probe)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        models[name], ports[name] = model, port
        runners.append(runner)
    try:
        yield models, ports
    finally:
        for runner in runners:
            await runner.cleanup()
