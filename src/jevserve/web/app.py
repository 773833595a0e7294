"""The web app: `create_app(settings)` wires the store, the results, the served model and the page routes.

Every page is rendered on the server and reads without JavaScript; a small script only sorts the board's columns
in place. Bad input never reaches a 500: forms are read with a size cap, ids are checked against the store and the
item pools, and every error is a small HTML page with a 4xx status and a sentence saying what was wrong.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from jevserve.web import pages, play
from jevserve.web.context import HERE, SESSION_COOKIE, Context, WebSettings

__all__ = ["WebSettings", "create_app"]


def create_app(settings: WebSettings) -> FastAPI:
    """The whole site as one FastAPI app."""
    app = FastAPI(title="jevserve web", docs_url=None, redoc_url=None, openapi_url=None)
    context = Context(settings)
    app.state.context = context
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")

    @app.middleware("http")
    async def anonymous_session(request: Request, call_next: Callable) -> Response:
        # A random id, set on the first visit; it only ties a person's rounds together (no personal data).
        cookie = request.cookies.get(SESSION_COOKIE, "")
        fresh = not (16 <= len(cookie) <= 64 and cookie.replace("-", "").replace("_", "").isalnum())
        request.state.session_id = secrets.token_urlsafe(18) if fresh else cookie
        response = await call_next(request)
        if fresh:
            response.set_cookie(SESSION_COOKIE, request.state.session_id, max_age=365 * 86400, httponly=True,
                                samesite="lax")
        return response

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return context.render(request, "error.html", status_code=exc.status_code, status=exc.status_code,
                              detail=exc.detail)

    @app.exception_handler(Exception)
    async def unexpected_error(request: Request, exc: Exception) -> Response:
        # A bug, not bad input: say so plainly rather than showing a traceback.
        return context.render(request, "error.html", status_code=500, status=500,
                              detail=f"internal error ({type(exc).__name__}); this is a bug in jevserve web")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    pages.register(app, context)
    play.register(app, context)
    app.add_middleware(HeadAsGet)
    return app


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

        await self.app({**scope, "method": "GET"}, receive, headers_only)
