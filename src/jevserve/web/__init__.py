"""jevserve web: the leaderboard, task and methodology pages, the playground (rounds in SQLite) and the live
decision demo, served by `jevserve web`.

    from jevserve.web import WebSettings, create_app
    app = create_app(WebSettings(results_dir=Path("results"), db_path=Path("web.sqlite"), decider=None))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevserve import lazy_exports

if TYPE_CHECKING:
    from jevserve.web.app import WebSettings, create_app
    from jevserve.web.store import Store

__all__ = ["Store", "WebSettings", "create_app"]

# The exports load on first use (PEP 562), so the command line can list `jevserve web` in an install without jinja2.
_EXPORTS = {"Store": "store", "WebSettings": "app", "create_app": "app"}


__getattr__ = lazy_exports(__name__, _EXPORTS)
