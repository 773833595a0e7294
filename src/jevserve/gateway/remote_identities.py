"""What each remote decider (address and model asked for) answered when last asked which model it serves
(`RemoteDecider.identity`), kept beside the calibration scores it keys: an endpoint that cannot answer at start is
taken to serve what it served then. Apart from the decider and the operating points, which both read the folder,
so that neither imports the other."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jevserve.cache_root import cache_root


def operating_points_dir() -> Path:
    """Where the calibration scores go: $JEVSERVE_CACHE/operating-points, else ~/.cache/jevserve/operating-points."""
    return cache_root() / "operating-points"


def _path() -> Path:
    return operating_points_dir() / "remote-identities.json"


def remembered_identities() -> dict[str, str]:
    """The identity each remote decider (address|model) had when last asked."""
    try:
        known = json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(known, dict):
        return {}
    return {k: v for k, v in known.items() if isinstance(k, str) and isinstance(v, str)}


def remember_identity(key: str, identity: str) -> None:
    """Keep a remote decider's identity by address and model (best effort: unwritable, it is only not remembered)."""
    known = remembered_identities()
    if known.get(key) == identity:
        return
    known[key] = identity
    path = _path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        return
