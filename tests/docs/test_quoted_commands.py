"""Every command that README.md and docs/*.md quote exists: `jevserve …` (its sub-commands and flags) and
`python benchmarks/…` (the script)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jevserve.cli import build_parser
from tests.docs.commands import BENCHMARK, JEVSERVE, check, quoted_commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def _wrong(doc: Path, kind: re.Pattern[str], parser) -> list[str]:
    quoted = [q for q in quoted_commands(doc) if kind.match(q.text)]
    return [f"{q}\n    {problem}" for q in quoted if (problem := check(q, parser, ROOT))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_jevserve_command_a_doc_quotes_exists(doc, parser):
    wrong = _wrong(doc, JEVSERVE, parser)
    assert not wrong, "commands the CLI does not have:\n" + "\n".join(wrong)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_benchmark_script_a_doc_quotes_exists(doc, parser):
    wrong = _wrong(doc, BENCHMARK, parser)
    assert not wrong, "benchmark scripts that do not exist:\n" + "\n".join(wrong)


@pytest.mark.parametrize(("kind", "at_least"), [(JEVSERVE, 100), (BENCHMARK, 20)], ids=["jevserve", "benchmarks"])
def test_the_docs_quote_commands_at_all(kind, at_least):
    # the check reads what the docs quote; if the reader stopped finding them, every test above would pass vacuously
    assert sum(1 for doc in DOCS for q in quoted_commands(doc) if kind.match(q.text)) > at_least
