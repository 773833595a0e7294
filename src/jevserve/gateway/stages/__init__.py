"""The stages of a gateway request, one module each, in the order `pipeline.serve` runs them."""

from jevserve.gateway.stages.act import Answer, Forward, act
from jevserve.gateway.stages.decide import decide
from jevserve.gateway.stages.forward import UpstreamReply, forward
from jevserve.gateway.stages.gate_reply import gate_reply
from jevserve.gateway.stages.limit import limit
from jevserve.gateway.stages.read import read_body
from jevserve.gateway.stages.record import record
from jevserve.gateway.stages.route import select_route
from jevserve.gateway.stages.store_reply import store_reply

__all__ = [
    "Answer",
    "Forward",
    "UpstreamReply",
    "act",
    "decide",
    "forward",
    "gate_reply",
    "limit",
    "read_body",
    "record",
    "select_route",
    "store_reply",
]
