"""The gRPC server: `envoy.service.ext_proc.v3.ExternalProcessor/Process` over grpc.aio, plus `grpc.health.v1`.

Health answers, as llm-d's endpoint picker names them: `liveness` (the process answers), `readiness` and
`envoy.service.ext_proc.v3.ExternalProcessor` (decisions loaded and not draining), and "" (the server overall).
Work a request does after its stream ends (storing a reply, writing the log) runs in tasks the server owns, so
a data plane that resets the stream right after the last answer cannot cut it short; `stop()` waits for them.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import grpc
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from jevserve.gateway.extproc.seam import Decisions
from jevserve.gateway.extproc.stream import ProtocolError, StreamProcessor, StreamSettings

logger = logging.getLogger("jevserve.extproc")

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["ExternalProcessor"].full_name
READY_SERVICES = ("", "readiness", SERVICE_NAME)
# SERVING while the decider answers, NOT_SERVING while it fails. Readiness does not follow it: while the decider fails
# every request still gets its decisions' fallbacks (`--failure` for the stream), and a data plane that reads the
# server as unhealthy fails every request instead (Envoy, with the panic threshold at 0). Probe this one to alert.
DECIDER_SERVICE = "jevserve.decider"
_MESSAGE_MARGIN_BYTES = 256 * 1024  # protobuf framing around a buffered body
_MIN_RECEIVE_BYTES = 64 * 1024 * 1024  # the largest message taken only to be refused with 413
# on SIGTERM, readiness reads NOT_SERVING this long while requests are still served: Envoy's health checker and a
# Kubernetes readiness probe take the replica out of rotation before it refuses new streams
NOT_READY_ANNOUNCE_S = 2.0
_CANCELLED = "the data plane cancelled the stream"
_ENDED_EARLY = "the stream ended before the reply did (the client went away, or the data plane stopped sending)"
# how long open streams may run on after a stop signal (and the readiness announcement): `--drain-s`
DRAIN_S = 5.0
INTERRUPTED = 130  # the exit status after Ctrl-C, as `jevserve gateway` and a shell report a command ended by SIGINT


class ExternalProcessorService(pb_grpc.ExternalProcessorServicer):
    """One `Process` stream per HTTP request, each run by a StreamProcessor over a fresh Exchange."""

    def __init__(self, decisions: Decisions, settings: StreamSettings) -> None:
        self.decisions = decisions
        self.settings = settings
        self._closing: set[asyncio.Task] = set()

    async def Process(
        self, request_iterator: AsyncIterator[pb.ProcessingRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ProcessingResponse]:
        """Answer one HTTP request's messages as they come; close its exchange however the stream ends."""
        processor = StreamProcessor(self.decisions.open(), self.settings)
        error: str | None = None
        try:
            async for message in request_iterator:
                for answer in await processor.feed(message):
                    yield answer
                if processor.finished:
                    break  # an immediate response ends the request; the data plane needs nothing more
            if not processor.settled:
                # a reset by the data plane (its client went away) ends the messages like a clean close does
                error = _ENDED_EARLY
        except asyncio.CancelledError:
            # a data plane may reset a stream whose reply is through; only an unfinished one was cut short
            error = None if processor.settled else _CANCELLED
            raise
        except ProtocolError as exc:
            error = f"protocol error: {exc}"
            logger.warning("ext_proc %s", error)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        finally:
            self.spawn(processor.exchange.close(processor.end(error)))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` to its end in a task the server owns (not cancelled with the stream)."""
        task = asyncio.get_running_loop().create_task(_logged(work))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def drain(self) -> None:
        """Wait for every request's closing work."""
        while self._closing:
            await asyncio.gather(*list(self._closing), return_exceptions=True)


async def _logged(work: Coroutine[Any, Any, None]) -> None:
    try:
        await work
    except Exception:
        logger.exception("closing a request failed")


class ExtProcServer:
    """A started-or-not ext_proc server: `await start(address)`, `await stop()`."""

    def __init__(self, decisions: Decisions, settings: StreamSettings | None = None) -> None:
        self.decisions = decisions
        self.settings = settings or StreamSettings()
        self.service = ExternalProcessorService(decisions, self.settings)
        self.health = HealthServicer()
        self._server: grpc.aio.Server | None = None  # made by `start`, in the event loop it serves in
        self.port: int | None = None
        self.ready = False  # listening and not draining (what the readiness services report)

    def _grpc_server(self) -> grpc.aio.Server:
        # gRPC refuses a larger message with RESOURCE_EXHAUSTED, which the data plane reads as a failure, not as the
        # client's error: take messages well past max_body_bytes so that the stream answers them 413 itself
        limit = max(4 * self.settings.max_body_bytes, _MIN_RECEIVE_BYTES) + _MESSAGE_MARGIN_BYTES
        options = [
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            # gRPC binds with SO_REUSEPORT by default: a second server on a taken port would bind it too and take a
            # share of the traffic, silently; without it the second bind fails, as any server's does
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(options=options)
        pb_grpc.add_ExternalProcessorServicer_to_server(self.service, server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        return server

    async def start(self, address: str = "127.0.0.1:9002") -> int:
        """Bind `address` (host:port; port 0 picks a free one), start serving and report ready; returns the port.
        Raises OSError, with the reason when it can be found, when the address cannot be bound."""
        problem = bind_problem(address)  # first, so that gRPC's own log line does not come before the message
        if problem is not None:
            raise OSError(problem)
        # made here, not in __init__: a gRPC aio server that is made and never started or stopped was freed by the
        # garbage collector after its event loop had closed, which crashed the process (a segfault) in a later test
        self._server = self._grpc_server()
        try:
            self.port = self._server.add_insecure_port(address)
        except RuntimeError:  # recent gRPC raises where older ones returned 0
            self.port = 0
        if self.port == 0:
            await self._server.stop(None)
            self._server = None
            raise OSError(bind_problem(address) or "gRPC refused the address")
        await self._server.start()
        await self.health.set("liveness", health_pb2.HealthCheckResponse.SERVING)
        for service in READY_SERVICES:
            await self.health.set(service, health_pb2.HealthCheckResponse.SERVING)
        self.ready = True
        return self.port

    async def report_decider(self, problem: str | None) -> None:
        """Set the `DECIDER_SERVICE` health answer: SERVING when `problem` is None, else NOT_SERVING."""
        answers = health_pb2.HealthCheckResponse
        await self.health.set(DECIDER_SERVICE, answers.SERVING if problem is None else answers.NOT_SERVING)

    async def stop(self, grace_s: float = 5.0, announce_s: float = 0.0) -> None:
        """Report not ready and keep serving for `announce_s` (so that health checks can see it), then let open
        streams finish for `grace_s`, finish closing work and release the decisions."""
        self.ready = False
        for service in READY_SERVICES:
            await self.health.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        if announce_s > 0:  # gRPC refuses every new call once it stops, health checks included
            await asyncio.sleep(announce_s)
        if self._server is not None:
            await self._server.stop(grace_s)
        await self.service.drain()
        await self.decisions.aclose()

    async def wait(self) -> None:
        """Serve until the server stops."""
        if self._server is not None:
            await self._server.wait_for_termination()


def bind_problem(address: str) -> str | None:
    """Why `address` (host:port) cannot be bound, from a plain bind of it (gRPC logs its own failure and says less),
    or None when it can; port 0 (any free port) always can."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, sockaddr = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds: TIME_WAIT is no reason
            probe.bind(sockaddr)
    except (OSError, ValueError) as exc:
        return getattr(exc, "strerror", None) or str(exc)
    return None


async def serve_until_stopped(
    decisions: Decisions,
    settings: StreamSettings,
    address: str,
    banner: list[str] | None = None,
    *,
    started: Callable[[ExtProcServer], Awaitable[Callable[[], Awaitable[None]]]] | None = None,
    drain_s: float = DRAIN_S,
) -> int:
    """Serve on `address` until SIGINT or SIGTERM, then stop gracefully (not ready first, open streams get `drain_s`
    to finish). `started(server)`, awaited once the server listens, starts what runs beside it and returns its stop
    function. Returns the exit status: INTERRUPTED after SIGINT (Ctrl-C), 0 after SIGTERM (an orchestrated stop)."""
    server = ExtProcServer(decisions, settings)
    stop = asyncio.Event()
    signals: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        signals.append(signum)
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await server.start(address)
    except Exception:
        await decisions.aclose()
        raise
    try:
        stop_beside = await started(server) if started is not None else None
    except Exception:
        await server.stop(grace_s=0)
        raise
    for line in banner or ():
        print(line, flush=True)
    await stop.wait()
    announce = NOT_READY_ANNOUNCE_S
    print(f"jevserve extproc: stopping (not ready for {announce:g} s, then open streams get {drain_s:g} s)", flush=True)
    await server.stop(grace_s=drain_s, announce_s=announce)
    if stop_beside is not None:
        await stop_beside()
    return INTERRUPTED if signals[0] == signal.SIGINT else 0
