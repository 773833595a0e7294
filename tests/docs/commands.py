"""Commands quoted in markdown, and whether the command line has them: `jevserve …` against the argparse parser
(every sub-command and flag), `python benchmarks/…` against the files of the repository.

A command is read from an inline code span that starts with it, or from a line of a fenced shell block. Shell
operators end it (`|`, `&&`, `;`, `>`), `...` elides the rest, `[--flag]` is an optional flag (still checked),
and other bracketed words (`[MODEL]`, `<url>`) are placeholders.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console", "zsh"}
SEPARATORS = {"|", "||", "&&", ";", ">", ">>", "2>", "2>&1", "&"}
# What may stand before the command on a shell line: a prompt, environment settings, wrappers that run it.
WRAPPERS = re.compile(r"^(\$\s+)?((\w+=\S*\s+)|(nice(\s+-n\s*-?\d+)?\s+)|(time\s+)|(timeout\s+\d+\S*\s+))*")
JEVSERVE = re.compile(r"^(\S*bin/)?(jevserve|python3?\s+-m\s+jevserve\.cli)(\s|$)")
BENCHMARK = re.compile(r"^(\S*/)?python3?\s+(benchmarks/\S+\.py)")


@dataclass(frozen=True)
class Quoted:
    """A command as a doc quotes it."""

    doc: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.doc.name}:{self.line}: {self.text}"


def _command_in(text: str) -> str | None:
    """The part of a shell line or code span that is a jevserve or benchmark command, or None."""
    text = WRAPPERS.sub("", text.strip())
    return text if JEVSERVE.match(text) or BENCHMARK.match(text) else None


def quoted_commands(doc: Path) -> Iterator[Quoted]:
    """Every jevserve or benchmark command `doc` quotes, in order."""
    fence: str | None = None
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("```"):
            fence = stripped[3:].strip().lower() if fence is None else None
            continue
        if fence is not None:
            if fence in SHELL_LANGUAGES:
                for segment in re.split(r"\s(?:&&|\|\||;)\s", stripped):
                    if command := _command_in(segment):
                        yield Quoted(doc, number, command)
            continue
        for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", line):
            if "·" not in span and (command := _command_in(span)):  # "serve · gateway · web": a list of parts
                yield Quoted(doc, number, command)


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _num_values(action: argparse.Action) -> int:
    """How many of the following words a flag takes (optional values: none, so a sub-command after it is seen)."""
    if action.nargs == 0 or action.nargs in ("?", "*"):
        return 0
    if isinstance(action.nargs, int):
        return action.nargs
    return 1 if action.nargs in (None, "+") else 0


def check_jevserve(words: list[str], parser: argparse.ArgumentParser) -> str | None:
    """None when `jevserve WORDS` names sub-commands and flags the parser has; else what is wrong."""
    path = ["jevserve"]
    skip = 0
    positionals_seen = 0
    for word in words:
        if skip:
            skip -= 1
            continue
        if word in SEPARATORS or word.startswith(("#", ">", "2>")):
            break
        if word in ("...", "…"):
            break
        optional = word.startswith("[") and word.endswith("]")
        word = word.strip("[]")
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            action = parser._option_string_actions.get(flag)
            if action is None:
                return f"`{' '.join(path)}` has no option {flag}"
            skip = 0 if "=" in word or optional else _num_values(action)
            continue
        if optional or word.startswith("<") or not word:
            continue
        sub = _subparsers(parser)
        if sub is not None and word in sub.choices:
            parser = sub.choices[word]
            path.append(word)
            positionals_seen = 0
            continue
        takes_positionals = [a for a in parser._actions if not a.option_strings and a is not sub]
        if sub is not None and not takes_positionals and positionals_seen == 0:
            return f"`{' '.join(path)}` has no sub-command {word!r} (it has: {', '.join(sub.choices)})"
        positionals_seen += 1
    return None


def check(quoted: Quoted, parser: argparse.ArgumentParser, root: Path) -> str | None:
    """None when the quoted command exists; else a sentence saying what does not."""
    if found := BENCHMARK.match(quoted.text):
        script = found.group(2)
        return None if (root / script).is_file() else f"no file {script}"
    try:
        words = shlex.split(quoted.text, comments=True)
    except ValueError as exc:
        return f"cannot split it as a shell command: {exc}"
    first = 3 if words[:2] in (["python", "-m"], ["python3", "-m"]) else 1
    return check_jevserve(words[first:], parser)
