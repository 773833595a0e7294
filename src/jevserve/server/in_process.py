"""Decision models served in process on a free local port, for the parts that may not import the server.

ARCHITECTURE.md keeps `bench/` and `train/` below `server/`: they reach a model only through an endpoint that the
command line hands them. These two functions are what `jevserve` hands them (see `jevserve.cli`): the embedded
models behind the server's app, and any list of backends behind it (the held-out heads of `jevserve train`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from jevserve.decide.base import DecisionBackend
from jevserve.server.app import create_app
from jevserve.server.background import running_server


class UnknownEmbeddedModelError(LookupError):
    """A model name the embedded endpoint does not serve; the message lists the ones it does."""


@dataclass(frozen=True)
class ServedModel:
    """A model being served in process until its context ends."""

    url: str  # base URL of the local server, e.g. http://127.0.0.1:40123
    model: str  # the model name to ask for
    version: str  # digest of everything its answers depend on (the embedded weights)


@contextmanager
def serve_backends(backends: Sequence[DecisionBackend]) -> Iterator[str]:
    """Serve `backends` behind the decision server's app on a free loopback port; yields the base URL."""
    with running_server(create_app(list(backends))) as url:
        yield url


def check_embedded_model(model: str | None) -> None:
    """UnknownEmbeddedModelError unless the embedded endpoint serves `model` (None: its default). It builds the
    backends without running them, so a command can refuse a mistyped name before its slow start."""
    from jevserve.decide.embedded import embedded_backends

    _served_name(embedded_backends(), model)


def _served_name(backends: Sequence[DecisionBackend], model: str | None) -> tuple[str, str]:
    """The name asked for (default: the embedded default's results row) and the model that answers to it."""
    from jevserve.decide.encoder import row_name

    # a model answers to its name and its aliases; the name asked for names the results row
    concrete = {name: b.card.name for b in backends for name in (b.card.name, *b.card.aliases)}
    chosen = model or row_name(backends[0].card.name)
    if chosen not in concrete:
        known = ", ".join(
            b.card.name + (f" (or {', '.join(b.card.aliases)})" if b.card.aliases else "") for b in backends
        )
        raise UnknownEmbeddedModelError(
            f"--model {chosen!r} is not served by the embedded endpoint; expected one of: {known}"
        )
    return chosen, concrete[chosen]


@contextmanager
def serve_embedded(model: str | None) -> Iterator[ServedModel]:
    """Serve the embedded models; `model` (default: the embedded default) must be one of them."""
    from jevserve.decide.embedded import embedded_backends, embedded_fingerprint

    backends = embedded_backends()
    chosen, concrete = _served_name(backends, model)
    with serve_backends(backends) as url:
        yield ServedModel(url, chosen, embedded_fingerprint(model=concrete))
