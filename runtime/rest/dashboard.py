"""The web dashboard the JobManager's REST server serves at `/` (Flink's web UI, small).

Every file ships in the package (`runtime/rest/dashboard/`): plain HTML, CSS and JavaScript,
nothing built or fetched at install or run time. `/login` takes the cluster token and sets it as an
HttpOnly, SameSite=Strict cookie; the pages and every data call they make (the REST API's own JSON
endpoints, which accept that cookie as well as the Bearer header) need it: without it a page
redirects to the login and a data call gets 401.
"""
from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

COOKIE = "millrace_token"
ASSETS = Path(__file__).with_name("dashboard")
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
_FILES = {p.name for p in ASSETS.iterdir() if p.suffix in _TYPES} if ASSETS.is_dir() else set()


def _asset(name: str) -> bytes:
    return (ASSETS / name).read_bytes()


def install(app: FastAPI, token_ok: Callable[[str | None], bool]) -> None:
    """The login, logout, page and asset routes (outside the OpenAPI schema: they are pages)."""

    def signed_in(request: Request) -> bool:
        return token_ok(request.cookies.get(COOKIE))

    @app.get("/", include_in_schema=False)
    async def index(request: Request) -> Response:
        if not signed_in(request):
            return RedirectResponse("/login", status_code=303)
        return HTMLResponse(_asset("index.html"), headers={"Cache-Control": "no-store"})

    @app.get("/login", include_in_schema=False)
    async def login_page() -> Response:
        return HTMLResponse(_asset("login.html"))

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        form = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"))
        token = (form.get("token") or [""])[0].strip()
        if not token_ok(token):
            error = b'<p class="error" id="login-error">Wrong token: use the token in the cluster\'s cluster.json.</p>'
            page = _asset("login.html").replace(b"<!--error-->", error)
            return HTMLResponse(page, status_code=401)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    @app.post("/logout", include_in_schema=False)
    async def logout() -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    @app.get("/dashboard/{name}", include_in_schema=False)
    async def asset(name: str, request: Request) -> Response:
        if not signed_in(request):
            return JSONResponse({"errors": ["sign in first: /login"]}, status_code=401)
        if name not in _FILES:
            return JSONResponse({"errors": [f"no such dashboard file: {name}"]}, status_code=404)
        return Response(_asset(name), media_type=_TYPES[Path(name).suffix], headers={"Cache-Control": "no-store"})


__all__ = ["COOKIE", "install"]
