"""What every page route shares: the site's settings, the request context (store, results, templates, data), form
reading and the error type pages raise. `app.py` builds the app from these; the page modules import only this."""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import queue
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from jevserve.gateway.responses import CLIENT_CLOSED
from jevserve.protocol.body import BODY_TIMEOUT_S, BodyTimeoutError, body_chunks
from jevserve.web.answering import Decider
from jevserve.web.decisions import Pools
from jevserve.web.site import SiteCache
from jevserve.web.store import Store

logger = logging.getLogger(__name__)

HERE = Path(__file__).parent
HEAD_SCOPE_KEY = "jevserve.head"  # in the scope of a HEAD request answered as GET (app.HeadAsGet)
SESSION_COOKIE = "jevserve_session"
MAX_FORM_BYTES = 16_384  # the playground's forms (a position and a choice)
MAX_LIVE_CHARS = 4_000  # the live demo's request text, in characters (the textarea's maxlength)
# The live demo's form: 4,000 characters of any script URL-encoded (a 4-byte UTF-8 character is 12 bytes as %XX),
# plus the field names and the route.
MAX_LIVE_FORM_BYTES = 12 * MAX_LIVE_CHARS + 4_096
MAX_ROUNDS = 30  # rounds one client address may start per window (0: no limit)
ROUNDS_WINDOW_S = 600.0
# Answers given sooner than this after the item was first shown are stored but left out of people's numbers: no
# one reads an item and picks an answer in under a second, a script does.
MIN_ANSWER_MS = 1000.0


@dataclass
class WebSettings:
    """Where the site reads and writes, and who answers."""

    results_dir: Path | None  # committed bench results (the board); None: the board packaged with jevserve
    db_path: Path  # the playground's SQLite file
    decider: Decider | None  # the served model; None: the playground shows stored answers only
    answers_dir: Path | None = None  # bench answers caches (reliability plots); None: no plots
    pools: Pools | None = None  # playground items; None: loaded from the bench data on first use
    data_factory: Callable[[], Any] | None = None  # builds bench.BenchData (task pages, pools)
    live: Any = None  # the live demo's decision function (web.live); None: the page says it is not configured
    site: SiteCache | None = None  # share one results cache between apps (tests); None: a new one
    board_cache: Path | None = None  # where computed board snapshots are kept between starts; None: not kept
    board_file: Path | None = None  # a snapshot of `bench board --out`: read first (or instead of the packaged one)
    max_rounds: int = MAX_ROUNDS  # rounds one client address may start per `rounds_window_s` (0: no limit)
    rounds_window_s: float = ROUNDS_WINDOW_S
    min_answer_ms: float = MIN_ANSWER_MS  # faster answers are stored but not counted in people's numbers
    # a model served under a new name whose board row keeps its earlier one: /models/<new> leads to the row
    board_names: Mapping[str, str] = field(default_factory=dict)


class PageError(HTTPException):
    """An error shown as an HTML page with its status and a sentence naming what was wrong."""


class RoundLimit:
    """At most `limit` rounds started per client address in any `window_s` seconds (a sliding window, in memory).

    It keeps one script from posing as hundreds of players in a few minutes; it cannot tell apart people behind one
    address (a proxy, an office), so the default leaves room for a few of them."""

    def __init__(self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window_s = window_s
        self.clock = clock
        self._starts: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def admit(self, address: str) -> float | None:
        """Count a round start for `address`; None when admitted, else the seconds until one more is allowed."""
        if self.limit <= 0:
            return None
        now = self.clock()
        with self._lock:
            if len(self._starts) > 10_000:  # forget addresses whose window has passed, so memory stays bounded
                self._starts = {a: q for a, q in self._starts.items() if q and q[-1] > now - self.window_s}
            starts = self._starts.setdefault(address, deque())
            while starts and starts[0] <= now - self.window_s:
                starts.popleft()
            if len(starts) >= self.limit:
                return starts[0] + self.window_s - now
            starts.append(now)
            return None


FORM_TIMEOUT_S = BODY_TIMEOUT_S  # the whole form, as the other servers read a body


class Pending:
    """What `Context.when_ready` answers while a page's part is still computed in the background."""


PENDING = Pending()


async def read_form(
    request: Request, max_bytes: int = MAX_FORM_BYTES, too_large: str = "", timeout_s: float | None = None
) -> dict[str, str]:
    """The url-encoded form body as single values; 413 over `max_bytes` (saying `too_large` when given), 400 when it
    is not a form, 408 when it has not all arrived within `timeout_s` (default FORM_TIMEOUT_S)."""
    timeout_s = FORM_TIMEOUT_S if timeout_s is None else timeout_s
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media and media != "application/x-www-form-urlencoded":  # a JSON or multipart body parses as an empty form
        raise PageError(415, f"the body is {media}; send the form as application/x-www-form-urlencoded")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise PageError(413, too_large or f"the form is {int(declared):,} bytes; at most {max_bytes:,} are accepted")
    body = b""
    try:
        async for chunk in body_chunks(request.stream(), timeout_s):
            body += chunk
            if len(body) > max_bytes:
                raise PageError(413, too_large or f"the form is over {max_bytes:,} bytes; at most {max_bytes:,} are "
                                                  "accepted")
    except ClientDisconnect:
        # the visitor left before sending the whole form: nothing to answer or store, and no traceback in the log
        raise PageError(CLIENT_CLOSED, "the client closed the connection before its form arrived") from None
    except BodyTimeoutError:
        # a client that declares a form and stops sending it would hold its connection open for as long as it likes
        raise PageError(408, f"the form did not arrive within {timeout_s:g} s",
                        headers={"Connection": "close"}) from None
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=32)
    except (UnicodeDecodeError, ValueError) as exc:
        raise PageError(400, f"the form could not be read ({exc}); send application/x-www-form-urlencoded") from exc
    return {k: v[-1] for k, v in parsed.items()}


class Context:
    """What routes share: settings, store, results, templates and the lazily loaded data."""

    def __init__(self, settings: WebSettings) -> None:
        _import_before_threads()
        self.settings = settings
        self.store = Store(settings.db_path)
        self.site = settings.site or SiteCache(settings.results_dir, settings.board_cache,
                                               snapshot=settings.board_file)
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters["num"] = _num
        self.templates.env.filters["duration"] = duration
        self.templates.env.filters["ratio"] = ratio
        self.templates.env.filters["linked_paths"] = linked_paths
        self.templates.env.filters["counted"] = counted_noun
        self._pools = settings.pools
        self._pools_loading = False  # pools_if_ready started loading them
        self._data: Any = None
        self._lock = threading.Lock()
        self.task_pages: dict[str, Any] = {}  # name → TaskDescription, or the exception reading its data raised
        self._task_pages_loading: set[str] = set()
        # task pages are read one at a time, by one thread: read together they each loaded the same sources (the
        # data's cache is filled by whichever finishes first) and held the interpreter from the pages being served
        self._task_queue: queue.SimpleQueue[tuple[str, dict[str, Any] | None]] = queue.SimpleQueue()
        self._task_reader: threading.Thread | None = None
        self.memo: dict[str, Any] = {}  # computed pages' parts: reliability curves, the people row, plots
        self._background: set[str] = set()  # memo keys when_ready is computing
        self._background_lock = threading.Lock()  # not self._lock, which data() holds while the data is set up
        self._plot_lock = threading.Lock()
        self.round_limit = RoundLimit(settings.max_rounds, settings.rounds_window_s)
        self.session_key = self.store.key("session")

    def data(self) -> Any:
        """The bench data (one BenchData for the app's lifetime, so each source is read once)."""
        with self._lock:
            if self._data is None:
                if self.settings.data_factory is None:
                    from jevserve.bench import BenchData

                    self._data = BenchData()
                else:
                    self._data = self.settings.data_factory()
            return self._data

    def pools(self) -> Pools:
        """The playground's item pools (loaded from the bench test sides on first use)."""
        if self._pools is None:
            from jevserve.web.decisions import load_pools

            pools = load_pools(self.data())
            with self._lock:
                self._pools = self._pools or pools
        return self._pools

    def pools_if_ready(self) -> Pools | None:
        """The item pools when they are loaded; otherwise None, with their loading started in the background (once),
        so a page that only shows something extra with them answers at once instead of waiting tens of seconds."""
        if self._pools is not None:
            return self._pools
        with self._lock:
            if not self._pools_loading:
                self._pools_loading = True
                threading.Thread(target=self._load_pools, name="pools", daemon=True).start()
        return None

    def _load_pools(self) -> None:
        """pools() in the background; a failure is logged and the next page that wants them starts it again (a
        thread that died left the pools unloaded for good)."""
        try:
            self.pools()
        except Exception:
            logger.exception("loading the playground's item pools failed; the next page that needs them retries")
            with self._lock:
                self._pools_loading = False

    def task_page_if_ready(self, name: str, baseline: dict[str, Any] | None) -> Any:
        """The task page's description (site.describe_task) when it is read; otherwise None, with its reading started
        in the background (once): reading a task's data and screening it takes up to a minute on a fresh start, and
        the page shows its questions and scores at once. An error reading it is returned (the page says it)."""
        if name in self.task_pages:
            return self.task_pages[name]
        with self._lock:
            if name not in self._task_pages_loading:
                self._task_pages_loading.add(name)
                self._task_queue.put((name, baseline))
                if self._task_reader is None:
                    self._task_reader = threading.Thread(target=self._read_tasks, name="task-pages", daemon=True)
                    self._task_reader.start()
        return None

    def _read_tasks(self) -> None:
        while True:
            self._read_task(*self._task_queue.get())

    def _read_task(self, name: str, baseline: dict[str, Any] | None) -> None:
        from jevserve.web.site import describe_task

        try:
            self.task_pages[name] = describe_task(name, self.data(), baseline)
        except Exception as exc:  # kept for the page to report; the next visit reads it again
            self.task_pages[name] = exc
            self._task_pages_loading.discard(name)

    def when_ready(self, key: str, compute: Callable[[], Any]) -> Any:
        """`compute()`'s result, kept in the memo under `key`, once it has run; until then PENDING, with it started
        in a background thread (once), so that a page whose part reads the bench data (up to a minute on a fresh
        start) answers at once. An exception it raised is answered once (the page says it); the next visit computes
        again."""
        if key in self.memo:
            value = self.memo[key]
            if isinstance(value, Exception):
                with self._background_lock:
                    self.memo.pop(key, None)
                    self._background.discard(key)
            return value
        with self._background_lock:
            if key not in self._background:
                self._background.add(key)
                threading.Thread(target=self._compute, args=(key, compute), name=f"prepare-{key}",
                                 daemon=True).start()
        return PENDING

    def _compute(self, key: str, compute: Callable[[], Any]) -> None:
        try:
            value = compute()
        except Exception as exc:  # kept for the page to report
            value = exc
        self.memo[key] = value

    def plot(self, name: str) -> bytes:
        """A board plot as PNG bytes, drawn once per board (one at a time: a second asker waits for the first)."""
        from jevserve.bench.board_plots import plot_png

        board = self.site.board()
        key = f"plot:{name}"
        with self._plot_lock:
            if self.memo.get(key, (None,))[0] is not board:
                self.memo[key] = (board, plot_png(board, name))
            return self.memo[key][1]

    def cached_answers(self, model: str) -> dict[str, Any] | None:
        """The model's bench answers cache (request key → answers), read once per file version; None without one."""
        if self.settings.answers_dir is None:
            return None
        from jevserve.web.calibration import cache_files, read_answers

        files = cache_files(self.settings.answers_dir, model)
        if not files:
            return None
        key = f"answers:{files[0]}:{files[0].stat().st_mtime}"
        if key not in self.memo:
            self.memo[key] = read_answers(files[0])
        return self.memo[key]

    def warm(self, pools_after_s: float = 10.0) -> None:
        """Load the board and draw its headline plot now, and the playground's item pools a little later, so neither
        the first visitor of the board nor the first player waits for them. The pools come from the bench data (tens
        of seconds of Python-heavy work) and would hold the interpreter while the first pages are served, hence the
        delay; a plot drawn while they load took ten times as long (seconds), hence drawing it first."""
        self.site.board()
        self.plot("headline")
        time.sleep(pools_after_s)
        self.pools()

    def render(
        self, request: Request, name: str, status_code: int = 200, headers: dict[str, str] | None = None,
        **context: Any,
    ) -> HTMLResponse:
        """Render a template with the shared context (and extra response headers, e.g. Allow or Retry-After)."""
        return self.templates.TemplateResponse(request, name, {"page": name.removesuffix(".html"), **context},
                                               status_code=status_code, headers=headers)


# a path of this site inside an error sentence ("answer it at /play/rounds/ID"): what the page makes a link of
# (no "&" in it: the sentence is matched escaped, where "&" starts an entity), whole or not at all: a path with an
# escaped character in it ("/models/<b>") is no page, and its first part alone ("/models/") is none either
_SITE_PATH = re.compile(
    r"(?<![\w/])/(?:play|models|tasks|people|methodology|live)(?:[/?][\w\-/?=%.]*)?(?<![.,;:])(?=[\s.,;:)\]]|$)"
)


def linked_paths(text: Any) -> Markup:
    """`text` escaped, with every path of this site in it made a link (an error page's sentence names where to go)."""
    escaped = str(escape(str(text)))
    return Markup(_SITE_PATH.sub(lambda m: f'<a href="{m.group(0)}">{m.group(0)}</a>', escaped))


def duration(ms: Any) -> str:
    """A time given in milliseconds, readable at any size: under 0.1 s in ms ("6.9 ms"), else in seconds ("3.2 s")."""
    try:
        value = float(ms)
    except (TypeError, ValueError):
        return "–"
    if value != value:
        return "–"
    if value < 100.0:
        return f"{value:.2g} ms" if value < 10 else f"{value:.0f} ms"
    return f"{value / 1000:.1f} s"


def counted_noun(count: int, noun: str) -> str:
    """`1 task`, `3 tasks`: a count with its noun (`{{ n|counted("task") }}`)."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def ratio(value: Any) -> str:
    """A ratio to two significant digits ("0.54×", "3.1×", "560×"), so a small one does not read as 0×."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    if number != number or number in (float("inf"), float("-inf")):
        return "–"
    if number >= 100:
        return f"{round(number, -len(str(int(number))) + 2):,.0f}×"
    return f"{float(f'{number:.2g}'):g}×"


def _num(value: Any, digits: int = 1) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    return "–" if number != number else f"{number:.{digits}f}"  # NaN → dash


def sign_session(key: bytes, token: str) -> str:
    """A session id the site issues: a random token and its HMAC-SHA256 under the site's key (hex, 32 digits), so
    the site accepts only ids it issued, never one a client chose."""
    return f"{token}.{hmac.new(key, token.encode('ascii'), hashlib.sha256).hexdigest()[:32]}"


def session_id(request: Request, key: bytes) -> str | None:
    """The request's session id (its cookie) when the site issued it under `key`, else None: a missing, malformed,
    client-chosen or tampered cookie counts as no session. Reading pages never create one: a session starts with a
    round or a live decision (`start_session`)."""
    cookie = request.cookies.get(SESSION_COOKIE, "")
    token, _, _ = cookie.partition(".")
    if not (16 <= len(token) <= 64 and token.isascii() and token.replace("-", "").replace("_", "").isalnum()):
        return None
    return cookie if hmac.compare_digest(cookie, sign_session(key, token)) else None


def start_session(request: Request, key: bytes) -> tuple[str, bool]:
    """The request's session id, or a new random one; and whether it is new (then `keep_session` must set it)."""
    found = session_id(request, key)
    return (found, False) if found else (sign_session(key, secrets.token_urlsafe(18)), True)


def keep_session(response: Response, session: str) -> Response:
    """Set the session cookie on a response (a random id; it only ties one browser's rounds together)."""
    response.set_cookie(SESSION_COOKIE, session, max_age=365 * 86400, httponly=True, samesite="lax")
    return response


def retry_after(seconds: float) -> dict[str, str]:
    """A Retry-After header for `seconds` (whole seconds, at least 1)."""
    return {"Retry-After": str(max(1, math.ceil(seconds)))}




def _import_before_threads() -> None:
    """Import, on the thread that builds the site, the libraries its background threads and pages import lazily:
    scikit-learn imported at the same moment by two threads (the playground's pools and a model page's reliability
    curve) failed in both with "partially initialized module" on a fresh install, a 500 and a dead loader."""
    import sklearn.calibration
    import sklearn.linear_model  # noqa: F401
