"""`jevserve`: one command line for every part (serve · sim · plan · bench · data · train · gateway · web).

Each part registers its own sub-commands in `<part>/cli.py` (a `register(subparsers)` function), so this file only
lists the parts. Heavy imports happen inside the commands, so `jevserve --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from jevserve import __version__

# Modules that define `register(subparsers)`; their order is the order of `jevserve --help`.
COMMAND_MODULES = (
    "jevserve.server.cli",
    "jevserve.bench.cli_data",
    "jevserve.bench.cli",
    "jevserve.sim.cli",
    "jevserve.lab.cli",  # adds the lab's experiments under `jevserve sim`, so it comes after it
    "jevserve.plan.cli",
    "jevserve.train.cli",
    "jevserve.web.cli",
    "jevserve.gateway.cli",
    "jevserve.engine.cli",
    "jevserve.loadgen.cli",
    "jevserve.gateway.extproc.cli",
)


def _serve_embedded(model: str | None) -> Any:
    """The embedded models on a local server, for bench and train commands (which may not import the server)."""
    from jevserve.server.in_process import serve_embedded

    return serve_embedded(model)


def _serve_backends(backends: Sequence[Any]) -> Any:
    """Any decision backends on a local server (the held-out heads of `jevserve train --heldout`)."""
    from jevserve.server.in_process import serve_backends

    return serve_backends(backends)


def _embed_texts(texts: Sequence[str]) -> Any:
    """Unit-length embeddings by the shipped int8 encoder, for default rules such as a cosine threshold."""
    from jevserve.decide.embedder import embed_texts

    return embed_texts(texts)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser with every part's sub-commands."""
    parser = argparse.ArgumentParser(
        prog="jevserve",
        description="Decision-model-aware LLM serving: serve System One decision models, simulate and plan "
        "serving policies, and benchmark decisions.",
    )
    parser.add_argument("--version", action="version", version=f"jevserve {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    # What the parts below the server get handed instead of importing it (ARCHITECTURE.md): every command's
    # namespace carries these, and the commands that need a model or an embedding pass them on.
    parser.set_defaults(serve_embedded=_serve_embedded, serve_backends=_serve_backends, embed_texts=_embed_texts)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `jevserve` script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    result = args.func(args)
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
