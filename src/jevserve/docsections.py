"""Generated sections of markdown docs: the block between two marker lines is rewritten by the command that owns
it (every report command of jevserve, which is why it lives at the lowest package that writes one), and everything
outside the markers (hand-written text) is kept."""

from __future__ import annotations

from pathlib import Path


def replace_block(text: str, start: str, end: str, block: str) -> str | None:
    """`text` with everything from `start` to the next `end` (markers included) replaced by `block`, which carries
    its own markers; None when `text` lacks them."""
    head, found, rest = text.partition(start)
    if not found or end not in rest:
        return None
    _, _, tail = rest.partition(end)
    return head + block + tail


def write_block(doc: Path, start: str, end: str, block: str, title: str) -> None:
    """Replace the marked block of `doc`, or append `block` when the doc has none (a new doc starts with `title`)."""
    text = doc.read_text() if doc.exists() else f"{title}\n"
    replaced = replace_block(text, start, end, block)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(replaced if replaced is not None else text.rstrip("\n") + "\n\n" + block + "\n")
