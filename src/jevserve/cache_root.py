"""Where jevserve keeps what it fetches or computes between runs: `$JEVSERVE_CACHE`, else `~/.cache/jevserve`.

One function for every part that keeps something there (the bench data and answers, the built encoder graphs, the
training embeddings, the gateway's calibration scores, the simulator's token counts, the web site's board and
playground), so that a variable given as `~/somewhere` (a systemd unit or a container's environment does not expand
it) names one folder for all of them. A leaf: it imports nothing of jevserve.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "JEVSERVE_CACHE"


def cache_root() -> Path:
    """`$JEVSERVE_CACHE` (a leading `~` expanded) when set and not empty, else `~/.cache/jevserve`."""
    root = os.environ.get(CACHE_ENV)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "jevserve"
