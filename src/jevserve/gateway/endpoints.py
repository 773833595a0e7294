"""The API the gateway serves, one definition for both front ends (`jevserve gateway`'s HTTP app and `jevserve
extproc`): the endpoints it decides on, its model list and its answer to any other path, so a client sees one gateway
behind either."""

from __future__ import annotations

from http import HTTPStatus
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jevserve.gateway.runtime import Gateway

API_PREFIX = "/v1"
ENDPOINT_PATHS = {"chat": "/chat/completions", "completions": "/completions"}  # below API_PREFIX, by endpoint
MODELS_PATH = "/models"  # below API_PREFIX


def model_list(gateway: Gateway) -> dict:
    """`GET /v1/models`: the route names clients ask for, with each route's decisions (their operating points where
    the route shows clients scores)."""
    data = [
        {
            "id": r.model,
            "object": "model",
            "created": gateway.started_at,
            "owned_by": "jevserve-gateway",
            "description": r.description,
            "decisions": {p.decision: p.to_dict() if r.client_details == "scores" else {"mode": p.mode}
                          for p in gateway.operating_points if p.route == r.model},
        }
        for r in gateway.config.routes
    ]
    return {"object": "list", "data": data}


def model_entry(gateway: Gateway, model_id: str) -> tuple[int, dict]:
    """`GET /v1/models/{id}` (the openai client's `models.retrieve`): the route's entry, or a 404 naming the routes."""
    from jevserve.gateway.errors import UnknownModelError

    for entry in model_list(gateway)["data"]:
        if entry["id"] == model_id:
            return 200, entry
    known = ", ".join(r.model for r in gateway.config.routes) or "none"
    error = UnknownModelError(f"unknown model {model_id!r}; this gateway serves: {known}", param="model")
    return error.status_code, error.body()


# What a 404 says: which paths there are, and, since behind Envoy a platform fronts other paths on the same listener,
# that the decision filter is what answered, not the model server
NOT_SERVED = (
    f"not found: the jevserve gateway serves POST {API_PREFIX}{ENDPOINT_PATHS['chat']}, POST "
    f"{API_PREFIX}{ENDPOINT_PATHS['completions']} and GET {API_PREFIX}{MODELS_PATH}; behind Envoy, route other paths "
    "around its ext_proc filter (docs/deploy.md)"
)


def http_error_body(status: int, detail: str | None = None) -> dict:
    """The OpenAI-shaped body of a path or method this gateway does not serve (404, 405)."""
    if status == 404:
        detail = NOT_SERVED
    message = detail if detail is not None else HTTPStatus(status).phrase
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}
