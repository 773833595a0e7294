"""jevserve web: the leaderboard, task and methodology pages, the playground (rounds in SQLite) and the live
decision demo, served by `jevserve web`.

    from jevserve.web import WebSettings, create_app
    app = create_app(WebSettings(results_dir=Path("results"), db_path=Path("web.sqlite"), decider=None))
"""

from jevserve.web.app import WebSettings, create_app
from jevserve.web.store import Store

__all__ = ["Store", "WebSettings", "create_app"]
