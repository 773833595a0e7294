"""Reading a request body safely: a size limit, a deadline, and gzip/deflate/zstd request encodings.

The limit applies to the body as sent and again after decompression, so a small compressed body cannot expand
without bound. Unsupported encodings and media types get 415, oversized bodies 413, a body that stalls past its
deadline 408 (protocol/body.py); never a 5xx.
"""

from __future__ import annotations

import zlib

from starlette.requests import Request

from jevserve.protocol import PayloadTooLargeError, UnsupportedMediaError
from jevserve.protocol.body import BODY_TIMEOUT_S, BodyTimeoutError, BodyTooLargeError, read_capped
from jevserve.protocol.errors import RequestTimeoutError

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


async def read_body(request: Request, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """Return the decoded body, or raise PayloadTooLargeError / UnsupportedMediaError / RequestTimeoutError (the
    whole body must arrive within `timeout_s`)."""
    _check_media_type(request.headers.get("content-type", ""))
    try:
        body = await read_capped(request.headers.get("content-length"), request.stream(), max_bytes, timeout_s)
    except BodyTooLargeError as exc:  # the server's limit is a flag: say which
        raise PayloadTooLargeError(f"{exc} (jevserve serve --max-body-bytes)") from None
    except BodyTimeoutError as exc:
        raise RequestTimeoutError(str(exc), headers={"Connection": "close"}) from None
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    return _decode(body, encoding, max_bytes)


def _check_media_type(content_type: str) -> None:
    media = content_type.split(";", 1)[0].strip().lower()
    # A missing type is read as JSON (lenient clients); anything else must be JSON.
    if media and media != "application/json" and not media.endswith("+json"):
        hint = (
            " (image assets and multipart bodies are not supported by this text-only server)"
            if "multipart" in media
            else ""
        )
        raise UnsupportedMediaError(f"content-type {media!r} is not supported; send application/json{hint}")
    # JSON is UTF-8 (RFC 8259); a body declared in another charset was read as UTF-8 all the same and refused as
    # "invalid unicode code point", which did not say what to change
    params = (p.partition("=") for p in content_type.split(";")[1:])
    charset = next((v.strip().strip('"').lower() for k, _, v in params if k.strip().lower() == "charset"), "utf-8")
    if charset not in ("utf-8", "utf8", "us-ascii", "ascii"):  # ASCII is UTF-8 too
        raise UnsupportedMediaError(f"charset {charset!r} is not supported; send the JSON body in UTF-8 "
                                    "(charset=utf-8, or no charset)")


def _decode(body: bytes, encoding: str, max_bytes: int) -> bytes:
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip", "deflate", "zstd"):
        raise UnsupportedMediaError(
            f"content-encoding {encoding!r} is not supported; use identity, gzip, deflate or zstd"
        )
    if not body:  # nothing to decode: refused as an empty body whatever the encoding (gzip's was 415, zstd's 422)
        return body
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _inflate(body, encoding, max_bytes)
    return _unzstd(body, max_bytes)


def _unzstd(body: bytes, max_bytes: int) -> bytes:
    """A zstd body, every frame of it; a frame cut short is refused."""
    import zstandard

    try:
        reader = zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True)  # every frame
        parts, total = [], 0
        while total <= max_bytes:
            part = reader.read(min(1 << 20, max_bytes + 1 - total))
            if not part:
                break
            parts.append(part)
            total += len(part)
        out = b"".join(parts)
        if len(out) > max_bytes:
            raise PayloadTooLargeError(f"decompressed body is over the limit of {max_bytes} bytes")
        # The reader stops quietly at a frame cut short: walk the frames to see each one end (their output is
        # bounded by the read above).
        rest = body
        while rest:
            frame = zstandard.ZstdDecompressor().decompressobj()
            frame.decompress(rest)
            if not frame.eof:
                raise UnsupportedMediaError("body is incomplete zstd data: a frame ends before its end")
            rest = frame.unused_data
    except zstandard.ZstdError as exc:
        raise UnsupportedMediaError(f"body is not valid zstd data: {exc}") from exc
    return out


def _inflate(body: bytes, encoding: str, max_bytes: int) -> bytes:
    """A gzip (every member of a multi-member file, as RFC 1952 allows) or deflate body; a stream that stops before
    its end, or bytes after a deflate stream, are refused rather than read as whatever arrived."""
    wbits = 47 if encoding != "deflate" else 15  # 47: gzip or zlib header, auto-detected
    out, rest = bytearray(), body
    try:
        while True:
            decoder = zlib.decompressobj(wbits)
            out += decoder.decompress(rest, max_bytes + 1 - len(out))
            if len(out) > max_bytes or decoder.unconsumed_tail:
                raise PayloadTooLargeError(f"decompressed body is over the limit of {max_bytes} bytes")
            if not decoder.eof:
                raise UnsupportedMediaError(f"body is incomplete {encoding} data: the stream ends before its end")
            rest = decoder.unused_data
            if not rest:
                return bytes(out)
            if encoding == "deflate":
                raise UnsupportedMediaError(f"body has {len(rest)} bytes after its deflate stream")
    except zlib.error as exc:
        raise UnsupportedMediaError(f"body is not valid {encoding} data: {exc}") from exc
