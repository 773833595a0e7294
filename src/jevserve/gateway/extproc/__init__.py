"""`jevserve extproc`: the gateway's decisions inside an Envoy filter chain, as an External Processing server."""

from jevserve.gateway.extproc.respond import answer_reply, error_reply, gateway_error_reply
from jevserve.gateway.extproc.seam import (
    Decisions,
    Exchange,
    Forward,
    Respond,
    ResponseEdit,
    ResponsePlan,
    StreamEnd,
)
from jevserve.gateway.extproc.server import ExtProcServer
from jevserve.gateway.extproc.stream import ProtocolError, StreamProcessor, StreamSettings

__all__ = [
    "Decisions",
    "Exchange",
    "ExtProcServer",
    "Forward",
    "ProtocolError",
    "Respond",
    "ResponseEdit",
    "ResponsePlan",
    "StreamEnd",
    "StreamProcessor",
    "StreamSettings",
    "answer_reply",
    "error_reply",
    "gateway_error_reply",
]
