"""The docs-command check itself: what it reads from markdown and what it refuses."""

import argparse
from pathlib import Path

import pytest

from tests.docs.commands import Quoted, check, check_jevserve, quoted_commands


def _parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="jevserve")
    commands = root.add_subparsers(dest="command")
    gateway = commands.add_parser("gateway")
    gateway.add_argument("--config")
    gateway.add_argument("--print-config", action="store_true")
    sub = gateway.add_subparsers(dest="sub")
    replay = sub.add_parser("replay")
    replay.add_argument("log")
    replay.add_argument("--sweep", action="store_true")
    serve = commands.add_parser("serve")
    serve.add_argument("model", nargs="?")
    serve.add_argument("--port", type=int)
    return root


@pytest.mark.parametrize(
    "command",
    [
        "gateway",
        "gateway --config gw.yaml",
        "gateway --config=gw.yaml replay LOG --sweep",
        "gateway replay LOG [--sweep]",
        "serve causal:/models/x --port 8000",
        "serve [MODEL]",
        "gateway ... --anything",  # elided
        "serve --port 1 | head",
    ],
)
def test_commands_the_parser_has_pass(command):
    assert check_jevserve(command.split(), _parser()) is None


@pytest.mark.parametrize(
    ("command", "complaint"),
    [
        ("gatway", "`jevserve` has no sub-command 'gatway'"),
        ("gateway --confg x", "`jevserve gateway` has no option --confg"),
        ("gateway replay LOG --sweeps", "`jevserve gateway replay` has no option --sweeps"),
        ("gateway [--dry-run]", "`jevserve gateway` has no option --dry-run"),
        ("gateway check gw.yaml", "`jevserve gateway` has no sub-command 'check'"),
    ],
)
def test_commands_the_parser_lacks_are_named(command, complaint):
    assert check_jevserve(command.split(), _parser()).startswith(complaint)


def test_quoted_commands_come_from_code_spans_and_shell_blocks(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(
        "Run `jevserve serve --port 1`, not `jevserve.serve` nor `pip install jevserve`; `serve · gateway`.\n"
        "```bash\n"
        "$ JEVSERVE_CACHE=/tmp nice -n 10 jevserve gateway --config gw.yaml && curl localhost\n"
        "python benchmarks/gateway/overhead.py --rounds 3\n"
        "```\n"
        "```yaml\n"
        "jevserve: not a command\n"
        "```\n"
        "`.venv/bin/jevserve serve` and `python -m jevserve.cli gateway`; the cache `~/.cache/jevserve`\n"
    )
    found = [(q.line, q.text) for q in quoted_commands(doc)]
    assert found == [
        (1, "jevserve serve --port 1"),
        (3, "jevserve gateway --config gw.yaml"),
        (4, "python benchmarks/gateway/overhead.py --rounds 3"),
        (9, ".venv/bin/jevserve serve"),
        (9, "python -m jevserve.cli gateway"),
    ]


def test_a_benchmark_command_needs_its_script(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "speed.py").write_text("")
    doc = Path("doc.md")
    assert check(Quoted(doc, 1, "python benchmarks/speed.py --x"), _parser(), tmp_path) is None
    assert check(Quoted(doc, 1, "python benchmarks/slow.py"), _parser(), tmp_path) == "no file benchmarks/slow.py"
    assert check(Quoted(doc, 1, "python -m jevserve.cli gatway"), _parser(), tmp_path).startswith("`jevserve` has no")
