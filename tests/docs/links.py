"""Links in the repository's markdown that point inside it: the file must exist, and a `#fragment` must name a
heading of the target (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered).

Links to the web (`http://`, `https://`, `mailto:`) are not followed: tests do not reach the network.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

# [text](target) and ![alt](target), the target up to a space or the closing parenthesis; reference definitions
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
DEFINITION = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


@dataclass(frozen=True)
class Link:
    """A link as written in a markdown file."""

    doc: Path
    line: int
    target: str


def links_in(doc: Path) -> Iterator[Link]:
    """Every link target in `doc` outside code blocks and code spans."""
    fence = False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip().startswith("```"):
            fence = not fence
            continue
        if fence:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        for match in [*LINK.finditer(prose), *DEFINITION.finditer(prose)]:
            yield Link(doc, number, match.group(1))


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: markup and punctuation dropped, lower case, spaces as hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip())
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w keeps letters and digits of any script, and _
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    """Every anchor a markdown file's headings make (a repeated heading gets -1, -2, ...) and explicit ids."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fence = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.strip().startswith("```"):
            fence = not fence
        if fence or not re.match(r"^#{1,6}\s", line):
            found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
            continue
        anchor = github_anchor(line.lstrip("#"))
        count = seen.get(anchor, 0)
        found.add(anchor if count == 0 else f"{anchor}-{count}")
        seen[anchor] = count + 1
    return found


def check_link(link: Link, root: Path) -> str | None:
    """None when an in-repository link resolves (file, and heading when it names one); else what is wrong."""
    target = link.target
    if target.startswith(EXTERNAL):
        return None
    path_part, _, fragment = target.partition("#")
    path = (link.doc.parent / unquote(path_part)).resolve() if path_part else link.doc.resolve()
    if not path.is_relative_to(root.resolve()):
        return f"{target} points outside the repository"
    if not path.exists():
        return f"{target}: no such file"
    if fragment and path.suffix == ".md" and unquote(fragment).lower() not in anchors(path):
        return f"{target}: {path.name} has no heading with anchor #{fragment}"
    return None
