"""Where jevserve keeps what it fetches or computes between runs: `$JEVSERVE_CACHE`, else `~/.cache/jevserve`.

One function for every part that keeps something there (the bench data and answers, the built encoder graphs, the
training embeddings, the gateway's calibration scores, the simulator's token counts, the web site's board and
playground), so that a variable given as `~/somewhere` (a systemd unit or a container's environment does not expand
it) names one folder for all of them; and the digest files kept there are checked by. A leaf: it imports nothing of
jevserve.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CACHE_ENV = "JEVSERVE_CACHE"


def cache_root() -> Path:
    """`$JEVSERVE_CACHE` (a leading `~` expanded) when set and not empty, else `~/.cache/jevserve`."""
    root = os.environ.get(CACHE_ENV)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "jevserve"


def sha256_file(path: Path) -> str:
    """The sha256 (hex) of a file, read in 1 MiB chunks: what the bench data's manifests record and what names the
    simulator's cached token counts."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
