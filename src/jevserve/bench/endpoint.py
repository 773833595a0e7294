"""Open the endpoint a bench command talks to: a URL, or `embedded` (the shipped model on a local server)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

EMBEDDED = "embedded"
DEFAULT_TIMEOUT_S = 120.0  # a bench request may wait behind a full batch queue; the SDK's 10 s would retry it


class EndpointError(ValueError):
    """Endpoint arguments that cannot work together; the message says what to pass."""


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests and which model name to ask for."""

    base_url: str
    model: str
    api_key: str | None
    label: str  # "embedded" or the URL, for results files
    version: str | None = None  # for the embedded models, a digest of their weights (see AnswersCache)


def _api_key(api_key_env: str | None) -> str | None:
    if api_key_env is None:
        return None
    key = os.environ.get(api_key_env)
    if not key:
        raise EndpointError(f"--api-key-env {api_key_env}: that environment variable is not set or empty")
    return key


@contextmanager
def open_endpoint(endpoint: str, model: str | None, api_key_env: str | None = None) -> Iterator[Endpoint]:
    """Yield a usable endpoint; `embedded` starts the shipped model on a free local port until the block ends."""
    if endpoint == EMBEDDED:
        from jevserve.decide.embedded import embedded_backends, embedded_fingerprint
        from jevserve.server.app import create_app
        from jevserve.server.background import running_server

        backends = embedded_backends()
        names = [b.card.name for b in backends]
        chosen = model or names[0]
        if chosen not in names:
            raise EndpointError(f"--model {chosen!r} is not served by the embedded endpoint; expected one of: "
                                f"{', '.join(names)}")
        with running_server(create_app(backends)) as url:
            yield Endpoint(url, chosen, None, EMBEDDED, embedded_fingerprint())
        return
    if not endpoint.startswith(("http://", "https://")):
        raise EndpointError(f"--endpoint {endpoint!r}; expected 'embedded' or a URL such as http://127.0.0.1:8795")
    if not model:
        raise EndpointError(
            "--model is required with a URL endpoint: the model name to ask for, which also names the results "
            "folder and the answers cache (e.g. --model jev-1.13.0)"
        )
    yield Endpoint(endpoint, model, _api_key(api_key_env), endpoint)
