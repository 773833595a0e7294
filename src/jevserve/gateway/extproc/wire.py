"""Envoy's ext_proc messages, read and built: header maps, mutations, body answers, immediate responses.

Field meanings follow envoy/service/ext_proc/v3/external_processor.proto (the `xds-protos` stubs):
- header values arrive in `raw_value` (bytes), names lower-cased; a repeated header arrives once per value;
- a body answer in FULL_DUPLEX_STREAMED mode must be a `streamed_response`; in the other modes `body` replaces the
  chunk the answer is for;
- `clear_route_cache` makes the data plane route again after header changes (ignored on the response path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from envoy.config.core.v3 import base_pb2
from envoy.extensions.filters.http.ext_proc.v3 import processing_mode_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.type.v3 import http_status_pb2

BodyMode = processing_mode_pb2.ProcessingMode.BodySendMode
BUFFERED = BodyMode.Value("BUFFERED")
BUFFERED_PARTIAL = BodyMode.Value("BUFFERED_PARTIAL")
STREAMED = BodyMode.Value("STREAMED")
FULL_DUPLEX_STREAMED = BodyMode.Value("FULL_DUPLEX_STREAMED")
NONE = BodyMode.Value("NONE")

# Streamed answers are cut into chunks below the 64 KiB the proto recommends as the largest (Envoy's gRPC client's
# default receive limit); the margin leaves room for the message's own framing.
MAX_STREAMED_CHUNK_BYTES = 62_000

_OVERWRITE = base_pb2.HeaderValueOption.HeaderAppendAction.Value("OVERWRITE_IF_EXISTS_OR_ADD")


def mode_name(mode: int) -> str:
    """`BUFFERED`, `FULL_DUPLEX_STREAMED`, ... for a BodySendMode value."""
    return BodyMode.Name(mode)


def header_dict(header_map: base_pb2.HeaderMap) -> dict[str, str]:
    """The headers as a dict (lower-case names); values of a repeated header joined with ', ' as HTTP allows."""
    out: dict[str, str] = {}
    for h in header_map.headers:
        value = h.raw_value.decode("utf-8", "replace") if h.raw_value else h.value
        key = h.key.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


def header_mutation(set_headers: Mapping[str, str], remove_headers: Iterable[str] = ()) -> pb.HeaderMutation:
    """Replace or add `set_headers` (values as raw bytes), remove `remove_headers`."""
    options = [
        base_pb2.HeaderValueOption(
            header=base_pb2.HeaderValue(key=key.lower(), raw_value=value.encode("utf-8")), append_action=_OVERWRITE
        )
        for key, value in set_headers.items()
    ]
    return pb.HeaderMutation(set_headers=options, remove_headers=[h.lower() for h in remove_headers])


def common(
    set_headers: Mapping[str, str] | None = None,
    remove_headers: Iterable[str] = (),
    *,
    body: bytes | None = None,
    clear_body: bool = False,
    clear_route_cache: bool = False,
) -> pb.CommonResponse:
    """A CONTINUE answer: header changes, optionally the chunk replaced (`body`) or cleared."""
    response = pb.CommonResponse(clear_route_cache=clear_route_cache)
    remove = tuple(remove_headers)
    if set_headers or remove:
        response.header_mutation.CopyFrom(header_mutation(set_headers or {}, remove))
    if body is not None:
        response.body_mutation.body = body
    elif clear_body:
        response.body_mutation.clear_body = True
    return response


def headers_answer(phase: str, response: pb.CommonResponse | None = None) -> pb.ProcessingResponse:
    """The answer to `request_headers` or `response_headers` (`phase` is "request" or "response")."""
    answer = pb.HeadersResponse(response=response) if response is not None else pb.HeadersResponse()
    return pb.ProcessingResponse(**{f"{phase}_headers": answer})


def body_answer(phase: str, response: pb.CommonResponse | None = None) -> pb.ProcessingResponse:
    """The answer to one `request_body` / `response_body` message in a buffered or streamed mode."""
    answer = pb.BodyResponse(response=response) if response is not None else pb.BodyResponse()
    return pb.ProcessingResponse(**{f"{phase}_body": answer})


def streamed_answers(phase: str, body: bytes, *, end_of_stream: bool) -> list[pb.ProcessingResponse]:
    """FULL_DUPLEX_STREAMED body answers carrying `body`, in chunks of at most MAX_STREAMED_CHUNK_BYTES."""
    pieces = [body[i : i + MAX_STREAMED_CHUNK_BYTES] for i in range(0, len(body), MAX_STREAMED_CHUNK_BYTES)] or [b""]
    out = []
    for n, piece in enumerate(pieces):
        streamed = pb.StreamedBodyResponse(body=piece, end_of_stream=end_of_stream and n == len(pieces) - 1)
        mutation = pb.BodyMutation(streamed_response=streamed)
        out.append(body_answer(phase, pb.CommonResponse(body_mutation=mutation)))
    return out


def trailers_answer(phase: str) -> pb.ProcessingResponse:
    """The answer to `request_trailers` / `response_trailers`: no change."""
    return pb.ProcessingResponse(**{f"{phase}_trailers": pb.TrailersResponse()})


def immediate(status: int, body: bytes, headers: Mapping[str, str], details: str) -> pb.ProcessingResponse:
    """A locally generated reply: the data plane answers the client with it and stops the request."""
    code = status if status in http_status_pb2.StatusCode.values() else 500
    reply = pb.ImmediateResponse(
        status=http_status_pb2.HttpStatus(code=code),
        headers=header_mutation(headers),
        body=body,
        details=details,
    )
    return pb.ProcessingResponse(immediate_response=reply)
