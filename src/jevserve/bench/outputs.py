"""Where the bench writes: checked before any asking, which can take hours."""

from __future__ import annotations

import tempfile
from pathlib import Path


def output_problem(path: Path, *, folder: bool) -> str | None:
    """Why `path` (a folder, or a file to write) cannot be written, or None. Checked before any asking, which can
    take hours; makes the folder (the file's folder) and a scratch file in it, and removes what it made."""
    directory = path if folder else path.parent
    if not folder and path.is_dir():
        return f"{path} is a folder; expected a file to write"
    blocker = next((d for d in (directory, *directory.parents) if d.exists() and not d.is_dir()), None)
    if blocker is not None:
        return f"{blocker} is a file; expected a folder"
    made = [d for d in (directory, *directory.parents) if not d.exists()]  # deepest first
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        return f"cannot write into {directory} ({exc.strerror or exc})"
    finally:
        # the folders made for the check go again: a command stopped before it writes leaves nothing behind (the
        # writing makes them anew)
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                break
    return None
