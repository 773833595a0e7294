"""JSON as RFC 8259 has it, for whatever a server sends on again: a client's body, an upstream's reply or event
(the gateway and the ext_proc server), or a body whose numbers reach a scheduler (the live engine).

Python's parser takes `NaN`, `Infinity` and `-Infinity`, which are not JSON, and reads a number past a double's range
(`1e400`) as infinity; a body holding one cannot be written back as JSON (`allow_nan=False` raises, the default
writes `Infinity`), so it is refused where it is read: a client's body with a 400, an upstream's reply as no JSON.
A value nested past what the parser follows is refused the same way (TooDeep, a ValueError), not with the parser's
RecursionError: an upstream's reply of 100,000 nested lists escaped every `except ValueError` as a 500.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any


class TooDeep(ValueError):
    """A JSON value nested past what the parser follows."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:32]} is beyond a double's range")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def loads(data: str | bytes) -> Any:
    """`json.loads` refusing NaN, Infinity, numbers past a double's range and nesting past the parser's depth
    (ValueError, as for any bad JSON; TooDeep for the depth)."""
    try:
        return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise TooDeep("nested deeper than the parser follows") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's own message tells the sender to call a Python function
            raise ValueError(f"an integer of more than {sys.get_int_max_str_digits():,} digits") from None
        raise


def compression_of(data: bytes) -> str | None:
    """The compression `data` starts like (its magic bytes), for a body that is not JSON: a client that compressed it
    (Content-Encoding) was told "not valid UTF-8" at byte 1, which says nothing of why. None: none recognised."""
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    if len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] * 256 + data[1]) % 31 == 0:  # RFC 1950's header check
        return "deflate (zlib)"
    return None
