"""docs/reference.md lists every command the command line has."""

from __future__ import annotations

import argparse
from pathlib import Path

from jevserve.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [" ".join(("jevserve", *path, name)), *_commands(sub, (*path, name))]
    return found


def test_the_reference_lists_every_command():
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    commands = _commands(build_parser())
    assert len(commands) > 20
    missing = [c for c in commands if f"| `{c}` |" not in reference]
    assert not missing, f"commands missing from docs/reference.md: {missing}"
