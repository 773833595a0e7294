"""The port an http(s) URL connects to. One reading for every place that checks a URL given by a person (the
gateway's config, its start-up reachability check, the load generator's --base-url), so they cannot disagree on
what "no port" means."""

from __future__ import annotations

import urllib.parse

DEFAULT_PORTS = {"http": 80, "https": 443}


def connect_port(url: str) -> int | None:
    """The port a connection to `url` goes to: the one it names, else its scheme's default. None when it names a
    port nothing can listen on: 0, out of range or not a number (urlsplit raises for the last two only when asked)."""
    parts = urllib.parse.urlsplit(url)
    try:
        named = parts.port
    except ValueError:
        return None
    if named is None:
        return DEFAULT_PORTS.get(parts.scheme)
    return named if named != 0 else None
