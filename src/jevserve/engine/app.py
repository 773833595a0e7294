"""The HTTP shell of the live engine: vLLM's OpenAI-compatible routes over a `LiveEngine`.

`/v1/chat/completions` and `/v1/completions` (streamed as server-sent events, or not), `/v1/models`, `/health` and
`/metrics` (vLLM's metric names). A request's tokens are sent as the engine's steps sample them; a client that goes
away has its request dropped before the next step, so its KV blocks are freed. Bad requests get a 4xx in OpenAI's
error shape whose message names the field; a full waiting queue gets 429 with Retry-After.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException

from jevserve.engine.core import LiveEngine
from jevserve.engine.filler import filler_text, stop_point
from jevserve.engine.lengths import ReplyLengths
from jevserve.engine.metrics import EngineMetrics
from jevserve.engine.openai import (
    Completion,
    RequestError,
    ResponseWriter,
    count_said,
    parse_body,
    parse_completion,
)
from jevserve.engine.requests import LiveRequest

RETRY_AFTER_S = 1
SHUTDOWN_ERROR = {"error": {"message": "the engine is shutting down: the reply was cut off before its end",
                             "type": "server_error", "param": None, "code": 503}}
SHUTDOWN_EVENT = ("data: " + json.dumps(SHUTDOWN_ERROR) + "\n\n").encode()


def _sse(data: dict) -> str:
    return "data: " + json.dumps(data, separators=(",", ":")) + "\n\n"


class EventStream(Response):
    """A server-sent event stream written straight to the ASGI `send`, one message per event, while a second task
    waits for the client to go away (then the stream's generator is closed, and with it the request).

    Starlette's StreamingResponse does the same through a task group and a wrapped `send` per chunk, which is most
    of a chunk's cost when hundreds of streams get a token every few milliseconds.
    """

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[str], on_gone: Callable[[], None] | None = None) -> None:
        super().__init__(media_type=self.media_type)
        # told the moment the client goes away, not at the next event: a request still queued has none to come
        # until it is admitted and prefilled, and meanwhile held a waiting place (new clients got 429 for it)
        self.on_gone = on_gone
        # The body's length is not known in advance; the response ends with an empty last message.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.events = events

    async def __call__(self, scope, receive, send) -> None:
        async def client_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        gone = asyncio.create_task(client_gone())
        if self.on_gone is not None:
            on_gone = self.on_gone
            gone.add_done_callback(lambda task: None if task.cancelled() else on_gone())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async for event in self.events:
                if gone.done():
                    break
                await send({"type": "http.response.body", "body": event.encode(), "more_body": True})
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the connection broke while writing: the client is gone
        except asyncio.CancelledError:
            # the server's graceful shutdown ran out with this stream open (SIGTERM): the client gets an error event
            # it can read instead of a body cut mid-event, and the log one line instead of a traceback
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": SHUTDOWN_EVENT, "more_body": False})
        finally:
            gone.cancel()
            await self.events.aclose()


def create_app(engine: LiveEngine, lengths: ReplyLengths, *, model_name: str, max_num_waiting: int) -> FastAPI:
    """The app serving `engine` under `model_name`; the engine's loop runs while the app does."""
    metrics = EngineMetrics(engine, model_name)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(engine.run(), name="jevserve-engine")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    app = FastAPI(title="jevserve engine", lifespan=lifespan)

    @app.exception_handler(RequestError)
    async def refuse(_: Request, exc: RequestError) -> JSONResponse:
        headers = {"Retry-After": str(RETRY_AFTER_S)} if exc.status == 429 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # an unknown route or method, in the shape an OpenAI client parses (FastAPI's own is `{"detail": ...}`)
        kind = {404: "NotFoundError", 405: "MethodNotAllowed"}.get(exc.status_code, "invalid_request_error")
        body = RequestError(str(exc.detail), status=exc.status_code, error_type=kind).body()
        return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    # HEAD as well: what load balancers' probes and uptime monitors send (a 405 reads as down)
    @app.api_route("/health", methods=["GET", "HEAD"])
    async def health() -> Response:
        return Response(status_code=200)

    started = int(time.time())

    def card() -> dict:
        # `speedup`: how much faster than the wall clock this engine runs, so a load generator can scale back
        return {"id": model_name, "object": "model", "created": started, "owned_by": "jevserve", "root": model_name,
                "parent": None, "max_model_len": lengths.max_model_len, "speedup": engine.speedup}

    @app.api_route("/v1/models", methods=["GET", "HEAD"])
    async def models() -> dict:
        return {"object": "list", "data": [card()]}

    @app.api_route("/v1/models/{model_id:path}", methods=["GET", "HEAD"])  # a served name may hold a "/"
    async def model(model_id: str) -> dict:
        if model_id != model_name:
            raise RequestError(f"the model `{model_id}` does not exist; this engine serves `{model_name}`",
                               status=404, param="model", error_type="NotFoundError")
        return card()

    @app.api_route("/metrics", methods=["GET", "HEAD"])
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    async def complete(request: Request, *, chat: bool) -> Response:
        body = parse_body(await request.body())
        completion = parse_completion(body, chat=chat, model_name=model_name)
        # Counting runs in a worker thread (the tokenizer releases the GIL), so a burst of arrivals does not hold up
        # the event loop, the engine's steps or /health.
        num_prompt = completion.num_prompt_token_ids or await asyncio.to_thread(lengths.count_tokens,
                                                                                list(completion.texts))
        live = _submit(completion, num_prompt)
        writer = ResponseWriter(completion, model_name)
        if completion.stream:
            return EventStream(_stream(live, writer), on_gone=lambda: _leave(live))
        return await _whole(request, live, writer)

    def _submit(completion: Completion, num_prompt: int) -> LiveRequest:
        limit = lengths.max_model_len
        asked = num_prompt + (completion.max_tokens or 1)
        if asked > limit:
            # the field at fault: the prompt when it leaves no room for one token, else the reply's max_tokens
            at_fault = "max_tokens" if completion.max_tokens and num_prompt < limit else completion.prompt_param
            reply = count_said(completion.max_tokens or 1)
            raise RequestError(f"this model's maximum context length is {limit} tokens; the request has "
                               f"{count_said(asked)} ({num_prompt} in the prompt, {reply} in the reply)",
                               param=at_fault)
        if completion.max_tokens is None and completion.min_tokens > limit - num_prompt:
            # vLLM fills in max_tokens (the room the context leaves) before it checks min_tokens against it: held
            # to the context's end instead, a min_tokens of 100,000 kept a connection open for 170 s
            raise RequestError(f"min_tokens={count_said(completion.min_tokens)} is over the {limit - num_prompt} "
                               f"tokens the context leaves for the reply ({limit} - {num_prompt} in the prompt)",
                               param="min_tokens")
        reply, source = lengths.reply_tokens(completion.prompt_text, num_prompt, completion.max_tokens,
                                             min_tokens=completion.min_tokens, ignore_eos=completion.ignore_eos)
        finish_reason = "length" if source in ("max_tokens", "max_model_len") else "stop"
        stopped = stop_point(completion.stop, reply, keep=completion.include_stop_str,
                             min_tokens=completion.min_tokens)
        if stopped is not None:
            reply, finish_reason = stopped.num_tokens, "stop"
        need = engine.blocks_needed(num_prompt, reply)
        if need > engine.num_total_blocks:
            alone = engine.blocks_needed(num_prompt, 1) > engine.num_total_blocks
            raise RequestError(f"the request needs {need} KV blocks ({num_prompt} prompt + {reply} reply tokens) "
                               f"but the engine has {engine.num_total_blocks}; send a shorter prompt or max_tokens",
                               param=completion.prompt_param if alone else "max_tokens")
        if engine.num_waiting >= max_num_waiting:
            raise RequestError(f"the engine has {engine.num_waiting} requests waiting (limit {max_num_waiting}); "
                               f"retry after {RETRY_AFTER_S} s", status=429, error_type="rate_limit_error")
        return engine.submit(uuid.uuid4().hex, num_prompt, reply, priority=completion.priority,
                             finish_reason=finish_reason, text_chars=stopped.num_chars if stopped else None)

    def _leave(live: LiveRequest) -> None:
        """A stream's client went away: the engine drops the request at its next step, and the stream stops waiting
        for its tokens."""
        engine.cancel(live)
        live.wake.set()

    async def _stream(live: LiveRequest, writer: ResponseWriter) -> AsyncIterator[str]:
        sent = chars = 0
        continuous = writer.completion.continuous_usage
        prompt_tokens = live.spec.num_prompt_tokens

        def text_chunk(text: str) -> str:  # usage so far in each chunk where asked (continuous_usage_stats)
            if continuous:
                return _sse(writer.chunk(text, usage=writer.usage(prompt_tokens, sent)))
            return writer.text_chunk_sse(text)

        try:
            if writer.completion.chat:
                yield _sse(writer.chunk("", first=True, usage=writer.usage(prompt_tokens, 0)))
            elif writer.completion.echo:
                yield text_chunk(writer.completion.echo)
            while True:
                await live.wake.wait()
                live.wake.clear()
                if live.left:
                    return
                if live.num_visible > sent:
                    text = filler_text(sent, live.num_visible)
                    if live.text_chars is not None:  # never past a stop string, not even its first part
                        text = text[: max(0, live.text_chars - chars)]
                    sent, chars = live.num_visible, chars + len(text)  # before the chunk: its usage counts them
                    if text:
                        yield text_chunk(text)
                if live.finished:
                    break
            yield _sse(writer.chunk("", live.finish_reason, usage=writer.usage(prompt_tokens, live.num_generated)))
            if writer.completion.include_usage:
                yield _sse(writer.usage_chunk(writer.usage(live.spec.num_prompt_tokens, live.num_generated)))
            yield "data: [DONE]\n\n"
        finally:
            engine.cancel(live)  # does nothing once the reply is complete

    async def _whole(request: Request, live: LiveRequest, writer: ResponseWriter) -> Response:
        async def finished() -> None:
            while not live.finished:
                await live.wake.wait()
                live.wake.clear()

        async def disconnected() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass

        done, gone = asyncio.create_task(finished()), asyncio.create_task(disconnected())
        try:
            await asyncio.wait({done, gone}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # the server's graceful shutdown ran out before the reply was done (SIGTERM): an answer in OpenAI's
            # shape, as a stream's error event says, instead of a plain-text 500 and a traceback
            engine.cancel(live)
            return JSONResponse(SHUTDOWN_ERROR, status_code=503)
        finally:
            for task in (done, gone):
                task.cancel()
        if not live.finished:
            engine.cancel(live)
            return Response(status_code=499)  # nobody reads it: the client closed the connection
        usage = writer.usage(live.spec.num_prompt_tokens, live.num_generated)
        text = filler_text(0, live.num_generated)
        if live.text_chars is not None:
            text = text[: live.text_chars]
        return JSONResponse(writer.response(writer.completion.echo + text, live.finish_reason, usage))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await complete(request, chat=True)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await complete(request, chat=False)

    app.state.engine, app.state.metrics = engine, metrics
    return app
