"""The web app: `create_app(settings)` wires the store, the results, the served model and the page routes.

Every page is rendered on the server and reads without JavaScript; a small script only sorts the board's columns
in place. Bad input never reaches a 500: forms are read with a size cap, ids are checked against the store and the
item pools, and every error is a small HTML page with a 4xx status and a sentence saying what was wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route

from jevserve.gateway.responses import CLIENT_CLOSED
from jevserve.web import pages, play
from jevserve.web.context import HEAD_SCOPE_KEY, HERE, Context, WebSettings

__all__ = ["WebSettings", "create_app"]


def create_app(settings: WebSettings) -> FastAPI:
    """The whole site as one FastAPI app."""
    app = FastAPI(title="jevserve web", docs_url=None, redoc_url=None, openapi_url=None)
    context = Context(settings)
    app.state.context = context
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.middleware("http")
    async def no_framing(request: Request, call_next: Callable) -> Response:
        # No other site may frame these pages (a framed playground could be clicked through by a hidden page).
        response = await call_next(request)
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == CLIENT_CLOSED:
            return Response(status_code=CLIENT_CLOSED)  # the visitor has gone: nobody reads a page
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            # the router names only the first route of the path; a path served by several (GET and POST) takes all
            methods = {m for r in app.routes if isinstance(r, Route) and r.matches(request.scope)[0] != Match.NONE
                       for m in (r.methods or ())}
            headers["Allow"] = ", ".join(sorted(methods)) or headers.get("Allow", "")
        return context.render(request, "error.html", status_code=exc.status_code, status=exc.status_code,
                              detail=_sentence(request, exc.status_code, str(exc.detail), headers),
                              headers=headers)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        # A bug, not bad input: say so plainly rather than showing a traceback.
        return context.render(request, "error.html", status_code=500, status=500,
                              detail=f"internal error ({type(exc).__name__}); this is a bug in jevserve web")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        # No icon, said without an error: browsers ask for it on every page and would log a 404 each time.
        return Response(status_code=204)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    pages.register(app, context)
    play.register(app, context)
    app.add_middleware(HeadAsGet)
    return app


PAGES = "/, /models/NAME, /tasks/NAME, /play, /people, /live and /methodology"


def _sentence(request: Request, status: int, detail: str, headers: dict[str, str]) -> str:
    """The error's own sentence; the framework's bare reason phrase ("Not Found") becomes one naming what was
    wrong."""
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:  # a status the standard library does not name
        return detail
    if detail != phrase:
        return detail
    path = request.url.path[:200]
    if status == 404:
        return f"there is no page at {path}; the site's pages are {PAGES}"
    if status == 405:
        allowed = headers.get("Allow", "")
        return f"{request.method} is not accepted at {path}" + (f"; it answers {allowed}" if allowed else "")
    return f"{detail} ({request.method} {path})"


class HeadAsGet:
    """Answer HEAD as GET without the body (RFC 9110: the same headers), so that uptime monitors and link checkers,
    which send HEAD, see 200 rather than 405 on every page."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        # marked, so that a page with a side effect of being seen (a round's item clock) can leave it out
        await self.app({**scope, "method": "GET", HEAD_SCOPE_KEY: True}, receive, headers_only)
