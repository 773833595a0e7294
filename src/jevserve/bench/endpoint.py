"""Open the endpoint a bench command talks to: a URL, or `embedded` (the shipped model on a local server)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

EMBEDDED = "embedded"
DEFAULT_TIMEOUT_S = 600.0  # a request may wait behind a full batch queue, minutes on two shared cores


# Serves the embedded models for the block's length and yields what is served (`url`, `model`, `version`): the
# command line passes `jevserve.server.in_process.serve_embedded`, since bench/ may not import the server itself.
ServeEmbedded = Callable[[str | None], AbstractContextManager[Any]]


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
def open_endpoint(
    endpoint: str, model: str | None, api_key_env: str | None = None, *, serve_embedded: ServeEmbedded | None = None
) -> Iterator[Endpoint]:
    """Yield a usable endpoint; `embedded` serves the shipped models locally (through `serve_embedded`) until the
    block ends."""
    if endpoint == EMBEDDED:
        if serve_embedded is None:
            raise EndpointError("--endpoint embedded needs the jevserve command line, which serves the embedded "
                                "models; from Python pass serve_embedded=jevserve.server.in_process.serve_embedded")
        with ExitStack() as stack:
            try:
                served = stack.enter_context(serve_embedded(model))
            except LookupError as exc:  # a model name it does not serve
                raise EndpointError(str(exc)) from exc
            yield Endpoint(served.url, served.model, None, EMBEDDED, served.version)
        return
    check_endpoint_arguments(endpoint, model, api_key_env)
    yield Endpoint(endpoint, model, _api_key(api_key_env), endpoint)


def check_endpoint_arguments(endpoint: str, model: str | None, api_key_env: str | None = None) -> None:
    """EndpointError for --endpoint, --model and --api-key-env values that cannot work, found without asking
    anything, so a command can refuse them before its slow start (loading the bench data)."""
    if model is not None and not model.strip():  # `--model ""` ran the whole bench on the default model
        raise EndpointError(f"--model {model!r}: expected a model's name")
    if endpoint == EMBEDDED:
        if api_key_env is not None:
            raise EndpointError("--api-key-env is for a URL endpoint; the embedded models are served here and "
                                "need no key")
        return
    if not endpoint.startswith(("http://", "https://")):
        raise EndpointError(f"--endpoint {endpoint!r}; expected 'embedded' or a URL such as http://127.0.0.1:8795")
    parts = urlsplit(endpoint)
    try:
        port = parts.port  # read for its ValueError: a port out of range
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:  # port 0 too: nothing ever answers there
        raise EndpointError(f"--endpoint {endpoint!r}: the port is not a number from 1 to 65535")
    if not parts.hostname:
        raise EndpointError(f"--endpoint {endpoint!r}: the URL names no host; e.g. http://127.0.0.1:8795")
    path = parts.path.rstrip("/")
    if path.endswith(("/v1/systemone", "/v1/models", "/v1")):
        root = endpoint[: endpoint.rstrip("/").rfind("/v1")]
        raise EndpointError(f"--endpoint {endpoint!r}: give the server's root ({root}); the bench adds "
                            "/v1/models and /v1/systemone itself")
    if not model:
        raise EndpointError(
            "--model is required with a URL endpoint: the model name to ask for, which also names the results "
            "folder and the answers cache (e.g. --model jev-1.13.0)"
        )
    _api_key(api_key_env)


class EndpointUnreachable(EndpointError):
    """Nothing answered at the URL (connection refused, DNS, timeout): it may come up, so the exit code is 1."""


def probe_endpoint(
    endpoint: str, model: str | None, api_key_env: str | None = None, *, timeout_s: float = 10.0,
    check_embedded: Callable[[str | None], None] | None = None,
) -> None:
    """Ask a URL endpoint's `GET /v1/models` before a command's slow start, and raise EndpointError when it is no
    System One server, refuses the key, or does not serve `model` (the command's to fix: exit 2), or
    EndpointUnreachable when nothing answers (exit 1). `embedded` is served by the command: its model name is
    checked by `check_embedded` (the command line's, which raises LookupError for a name it does not serve)."""
    if endpoint == EMBEDDED:
        if check_embedded is not None:
            try:
                check_embedded(model)
            except LookupError as exc:
                raise EndpointError(str(exc)) from exc
        return
    from jevserve.client import RetryPolicy, SystemOne, SystemOneAPIError, SystemOneConnectionError

    client = SystemOne(endpoint, _api_key(api_key_env), timeout_s=timeout_s, retry=RetryPolicy(max_retries=0))
    status = 200
    try:
        models = client.models()
        names = {name for m in models for name in (m.get("name"), *(m.get("aliases") or ())) if name}
    except SystemOneConnectionError as exc:
        raise EndpointUnreachable(f"--endpoint {endpoint}: nothing answered GET {endpoint.rstrip('/')}/v1/models "
                                  f"({exc}); is the server running there? Nothing was asked") from None
    except SystemOneAPIError as exc:
        if exc.status_code in (401, 403):
            raise EndpointError(f"--endpoint {endpoint} refused GET /v1/models ({exc.status_code}): give "
                                "--api-key-env the variable that holds a key it accepts") from None
        models, status = None, exc.status_code
    except (ValueError, KeyError, TypeError, AttributeError):  # a 2xx that is no list of models
        models = None
    finally:
        client.close()
    if models is None and status in (404, 405):
        return  # the contract's models route is a SHOULD: the version probes (POST /v1/systemone) tell the rest
    if models is None and status >= 500:
        raise EndpointUnreachable(f"--endpoint {endpoint}: GET /v1/models failed with {status}; is the server up and "
                                  "well? Nothing was asked")
    if models is None:
        raise EndpointError(f"--endpoint {endpoint} is not a System One server: GET /v1/models answered "
                            f"{status} without a list of models (an OpenAI server lists `data`; the bench asks "
                            "POST /v1/systemone)")
    if model and names and model not in names:
        raise EndpointError(f"--endpoint {endpoint} does not serve --model {model!r}; it serves "
                            f"{', '.join(sorted(names))}")
