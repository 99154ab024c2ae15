"""A login in front of a dashboard: one token, given as a bearer header or through a login page.

    GET  /login     a form asking for the token
    POST /login     token=<...>: right -> a session cookie and a redirect to the index; wrong -> 401
    GET  /logout    forgets the cookie

Every other path needs `Authorization: Bearer <token>` (scripts, the JSON
views) or the session cookie (a browser after /login). Without either, a page
redirects to /login and a JSON view answers 401. The cookie holds an HMAC of
the token, not the token, and is HttpOnly and SameSite=Strict; the views are
read-only, so there is no state a forged request could change.

Who serves which token: the Kubernetes operator its login Secret's
(operator/k8s/master_secret.py), `tinystream controller` its admin token
(`tinystream token --admin`). `tinystream dev` serves its dashboard on
127.0.0.1 without a login, and says so.
"""

from __future__ import annotations

import hashlib
import hmac
import html
from collections.abc import Awaitable, Callable

from aiohttp import web

from tinystream.controller_auth import bearer

COOKIE = "tinystream_dashboard"
OPEN_PATHS = frozenset({"/login", "/logout"})
MAX_TOKEN_CHARS = 4096

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

LOGIN_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>TinyStream: log in</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem}}input{{font:inherit;width:32rem}}</style></head>
<body><h1>TinyStream dashboard</h1>{message}
<form method="post" action="login"><p><label>Token <input type="password" name="token" autofocus></label></p>
<p><button type="submit">Log in</button></p></form>
<p>{where}</p></body></html>
"""


def _session(token: str) -> str:
    return hmac.new(token.encode(), b"tinystream dashboard session", hashlib.sha256).hexdigest()


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _wants_json(request: web.Request) -> bool:
    return "/api/" in request.path or request.path.endswith(".json") or (
        "application/json" in request.headers.get("Accept", "") and "text/html" not in request.headers.get("Accept", ""))


def require_login(app: web.Application, token: str, *, where: str = "") -> None:
    """Put `app` (every path but /login and /logout) behind `token`; `where` tells a user where to find it."""
    if not token:
        raise ValueError("a dashboard login needs a non-empty token")
    session = _session(token)

    def page(message: str, status: int) -> web.Response:
        text = LOGIN_HTML.format(message=f"<p><strong>{html.escape(message)}</strong></p>" if message else "",
                                 where=html.escape(where))
        return web.Response(text=text, content_type="text/html", status=status, headers={"Cache-Control": "no-store"})

    async def login_form(_: web.Request) -> web.Response:
        return page("", 200)

    async def login(request: web.Request) -> web.Response:
        form = await request.post()
        given = form.get("token")
        if not isinstance(given, str) or len(given) > MAX_TOKEN_CHARS or not _same(given.strip(), token):
            return page("That is not the dashboard's token.", 401)
        response = web.HTTPSeeOther("./")
        response.set_cookie(COOKIE, session, httponly=True, samesite="Strict", secure=request.secure, path="/")
        raise response

    async def logout(_: web.Request) -> web.Response:
        response = web.HTTPSeeOther("login")
        response.del_cookie(COOKIE, path="/")
        raise response

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        given = bearer(request.headers.get("Authorization"))
        if (given is not None and _same(given, token)) or _same(request.cookies.get(COOKIE, ""), session):
            return await handler(request)
        if _wants_json(request):
            return web.json_response({"error": "unauthorized", "message": "log in at /login, or send "
                                      "Authorization: Bearer <the dashboard's token>"}, status=401)
        raise web.HTTPSeeOther("/login")

    app.middlewares.append(guard)
    app.add_routes([web.get("/login", login_form), web.post("/login", login), web.get("/logout", logout)])
