"""Security of the REST API: bearer-token authentication, the dashboard's login, request-body
limits and HTTPS settings for uvicorn.

* ``security.rest.authentication: token`` (the default): every request but ``GET /health``
  needs ``Authorization: Bearer <token>``, or the dashboard's cookie. ``none`` turns it off.
* Browsers: ``POST /login`` with the token (a form field or JSON ``{"token": ...}``) sets an
  HttpOnly, SameSite=Strict cookie; ``POST /logout`` clears it. A browser that opens any page
  without it gets a small login form (status 401), so the dashboard needs no login code of its
  own: its scripts' same-origin requests carry the cookie, and on a 401 they reload the page.
  The cookie holds an HMAC of the token, never the token. A cookie-authenticated request that
  changes state must come from the same origin (``Origin`` checked), against CSRF.
* Every request body is limited to ``rest.server.max-content-length`` (413), before and while
  it is read; unauthenticated requests are answered before their body is read.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import logging
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypedDict
from urllib.parse import parse_qs, urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from yarnflink.common.config import Configuration
from yarnflink.dispatcher.options import RestOptions
from yarnflink.security.internal import SecurityConfigError
from yarnflink.security.material import read_token
from yarnflink.security.options import SecurityOptions

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: The one endpoint anyone may call (liveness probes, load balancers).
HEALTH_PATH = "/health"
LOGIN_PATH, LOGOUT_PATH = "/login", "/logout"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class TokenAuth:
    """Checks a request's credentials against the cluster's token (constant-time)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")
        digest = hashlib.sha256(self._token).hexdigest()
        # Cookies are per host, not per port: name the cookie after the cluster so that sessions
        # on other ports of the same host neither read nor overwrite it.
        self.cookie_name = f"yarnflink-auth-{digest[:16]}"
        self.cookie_value = hmac.new(self._token, b"yarnflink dashboard cookie", hashlib.sha256).hexdigest()

    def token_matches(self, candidate: str) -> bool:
        return hmac.compare_digest(candidate.strip().encode("utf-8"), self._token)

    def authenticate(self, headers: Headers) -> str | None:
        """``"bearer"``, ``"cookie"`` or None (no valid credentials)."""
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and value and self.token_matches(value):
            return "bearer"
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie_name and hmac.compare_digest(value.encode(), self.cookie_value.encode()):
                return "cookie"
        return None


def token_auth_from_config(config: Configuration) -> TokenAuth | None:
    """None if authentication is off; SecurityConfigError if it is on without a token."""
    if config.get(SecurityOptions.REST_AUTHENTICATION) == "none":
        return None
    path = config.get(SecurityOptions.REST_TOKEN_FILE)
    if not path:
        raise SecurityConfigError(
            "security.rest.authentication is 'token' but security.rest.token-file is not set "
            "(a local cluster generates it; set security.rest.authentication: none to serve "
            "the REST API without authentication)"
        )
    try:
        return TokenAuth(read_token(str(path)))
    except (OSError, ValueError) as e:
        raise SecurityConfigError(f"cannot read the REST token from {path!r}: {e}") from None


class UvicornSslOptions(TypedDict, total=False):
    ssl_certfile: str
    ssl_keyfile: str


def uvicorn_ssl_options(config: Configuration) -> UvicornSslOptions:
    """uvicorn.Config keyword arguments for HTTPS (empty when ``security.ssl.rest.enabled`` is off)."""
    if not config.get(SecurityOptions.SSL_REST_ENABLED):
        return {}
    cert, key = config.get(SecurityOptions.SSL_REST_CERT), config.get(SecurityOptions.SSL_REST_KEY)
    if not cert or not key:
        raise SecurityConfigError(
            "security.ssl.rest.enabled is true but security.ssl.rest.cert and "
            "security.ssl.rest.key do not both name PEM files"
        )
    return {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"errors": [message]}, status_code=status, headers=headers)


def _same_origin(headers: Headers) -> bool:
    origin = headers.get("origin")
    if origin is None:
        return True  # not a browser's cross-site request (SameSite=Strict keeps the cookie off those)
    return urlsplit(origin).netloc.lower() == headers.get("host", "").lower()


def _safe_next(value: str) -> str:
    """Only same-site relative paths (no open redirect)."""
    return value if value.startswith("/") and not value.startswith(("//", "/\\")) else "/"


_LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>yarnflink: sign in</title>
<style>body{{font-family:sans-serif;max-width:28em;margin:4em auto}}input{{width:100%;padding:.4em}}</style>
</head><body><h1>yarnflink</h1>
<p>This cluster requires its access token. <code>yarnflink session start</code> stored it in the
session's <code>security/rest-token</code> file (readable only by you).</p>
<form method="post" action="/login"><input type="hidden" name="next" value="{next}">
<label>Token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<p><button type="submit">Sign in</button></p></form></body></html>
"""


class _BodyLimit:
    """One request whose body is counted while the app reads it (a chunked body declares no
    length). Past the limit the app is told the client went away (``http.disconnect``) instead of
    getting more, so it holds at most the limit; whatever it then raises or answers is dropped,
    what it buffered is released at once, and the client gets 413 with ``{"errors": [...]}``.

    Nothing is raised through ``receive``: the app reads it inside task groups (Starlette's
    BaseHTTPMiddleware), which would wrap the exception in an ExceptionGroup (a 500)."""

    def __init__(self, limit: int, receive: Receive, send: Send) -> None:
        self.limit = limit
        self._receive = receive
        self._send = send
        #: body bytes handed to the app (at most ``limit``)
        self.read = 0
        self.exceeded = False
        self._response_started = False

    async def receive(self) -> Message:
        if self.exceeded:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            size = len(message.get("body", b""))
            if self.read + size > self.limit:
                self.exceeded = True  # the rest of the body is discarded by the server unread
                return {"type": "http.disconnect"}
            self.read += size
        return message

    async def send(self, message: Message) -> None:
        if self.exceeded and not self._response_started:
            return  # the app's answer to a body it never got whole: the 413 below replaces it
        if message["type"] == "http.response.start":
            self._response_started = True
        await self._send(message)

    async def run(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], scope: Scope) -> None:
        try:
            await app(scope, self.receive, self.send)
        except Exception as e:
            if not self.exceeded or self._response_started:
                raise
            # the frames of the failed read hold the buffered body, and exception cycles would keep
            # them until the garbage collector's next full run: let them go now
            _clear_traceback_frames(e)
            del e
        if self.exceeded and not self._response_started:
            self._response_started = True
            message = f"request body exceeds rest.server.max-content-length ({self.limit} bytes)"
            await _error(413, message)(scope, self._receive, self._send)


def _clear_traceback_frames(error: BaseException) -> None:
    """Drops the local variables of the finished frames in ``error``'s traceback and in those of
    the exceptions it was chained to or groups."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        e = pending.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        pending += [c for c in (e.__cause__, e.__context__) if c is not None]
        if isinstance(e, BaseExceptionGroup):
            pending += list(e.exceptions)


class RestSecurityMiddleware:
    """Pure ASGI middleware in front of the whole app (so it covers every route, docs included)."""

    def __init__(
        self, app: Callable[[Scope, Receive, Send], Awaitable[None]], *, auth: TokenAuth | None, max_body: int
    ) -> None:
        self.app = app
        self.auth = auth
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "websocket"
            and self.auth is not None
            and self.auth.authenticate(Headers(scope=scope)) is None
        ):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})  # policy violation: no credentials
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        method, path = scope["method"], scope["path"]
        if self.auth is not None and path != HEALTH_PATH and not (path == LOGIN_PATH and method == "POST"):
            how = self.auth.authenticate(headers)
            if how is None:
                await self._unauthorized(scope, headers)(scope, receive, send)
                return
            if how == "cookie" and method not in _SAFE_METHODS and not _same_origin(headers):
                await _error(403, "cross-origin request refused")(scope, receive, send)
                return
        declared = headers.get("content-length")
        if declared is not None:
            if not declared.strip().isdigit():
                await _error(400, "invalid Content-Length header")(scope, receive, send)
                return
            if int(declared) > self.max_body:
                await _error(
                    413,
                    f"request body of {int(declared)} bytes exceeds "
                    f"rest.server.max-content-length ({self.max_body} bytes)",
                )(scope, receive, send)
                return
        await _BodyLimit(self.max_body, receive, send).run(self.app, scope)

    def _unauthorized(self, scope: Scope, headers: Headers) -> Response:
        challenge = {"WWW-Authenticate": 'Bearer realm="yarnflink"'}
        if scope["method"] == "GET" and "text/html" in headers.get("accept", ""):
            target = scope["path"] + (
                ("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else ""
            )
            page = _LOGIN_PAGE.format(next=html.escape(_safe_next(target), quote=True))
            return HTMLResponse(page, status_code=401, headers=challenge)
        return _error(
            401,
            "authentication required: send 'Authorization: Bearer <token>' with the "
            "cluster's REST token (its session's security/rest-token file)",
            challenge,
        )


def install_rest_security(app: Any, config: Configuration) -> None:
    """Adds the middleware, ``GET /health``, ``POST /login``, ``POST /logout`` and the bearer
    scheme in the OpenAPI description to a FastAPI ``app``. Raises SecurityConfigError if
    authentication is on without a token."""
    auth = token_auth_from_config(config)
    https = bool(config.get(SecurityOptions.SSL_REST_ENABLED))
    max_body = int(config.get(RestOptions.SERVER_MAX_CONTENT_LENGTH))
    app.add_middleware(RestSecurityMiddleware, auth=auth, max_body=max_body)

    async def health() -> dict[str, str]:
        return {"status": "ok"}

    async def login(request: Request) -> Response:
        if auth is None:
            return JSONResponse({"authentication": "none"})
        body = await request.body()
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        token, next_path, form = "", "/", content_type == "application/x-www-form-urlencoded"
        try:
            if form:
                fields = parse_qs(body.decode("utf-8"), max_num_fields=8)
                token = fields.get("token", [""])[0]
                next_path = _safe_next(fields.get("next", ["/"])[0])
            elif body:
                data = json.loads(body)
                token = data.get("token", "") if isinstance(data, dict) else ""
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: deeply nested JSON
            token = ""
        if not isinstance(token, str) or not auth.token_matches(token):
            return _error(401, "invalid token", {"WWW-Authenticate": 'Bearer realm="yarnflink"'})
        response: Response = RedirectResponse(next_path, status_code=303) if form else JSONResponse({})
        response.set_cookie(
            auth.cookie_name, auth.cookie_value, httponly=True, samesite="strict", secure=https, path="/"
        )
        return response

    async def logout() -> Response:
        response = JSONResponse({})
        if auth is not None:
            response.delete_cookie(auth.cookie_name, path="/", httponly=True, samesite="strict", secure=https)
        return response

    token_body = {
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {"type": "object", "properties": {"token": {"type": "string"}}, "required": ["token"]}
                },
                "application/x-www-form-urlencoded": {
                    "schema": {
                        "type": "object",
                        "properties": {"token": {"type": "string"}, "next": {"type": "string"}},
                        "required": ["token"],
                    }
                },
            },
        }
    }
    errors = {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["errors"],
                "properties": {"errors": {"type": "array", "items": {"type": "string"}}},
            }
        }
    }
    empty = {"application/json": {"schema": {"type": "object"}}}
    app.add_api_route(HEALTH_PATH, health, methods=["GET"], summary="Liveness check (needs no token)")
    app.add_api_route(
        LOGIN_PATH,
        login,
        methods=["POST"],
        openapi_extra=token_body,
        response_class=JSONResponse,
        summary="Exchange the cluster's token for the dashboard's cookie",
        responses={
            200: {"description": "cookie set (JSON request)", "content": empty},
            303: {"description": "cookie set, redirect to 'next' (form request)"},
            401: {"description": "invalid token", "content": errors},
        },
    )
    app.add_api_route(
        LOGOUT_PATH,
        logout,
        methods=["POST"],
        response_class=JSONResponse,
        summary="Clear the dashboard's cookie",
        responses={200: {"description": "cookie cleared", "content": empty}},
    )

    if auth is None:
        return
    build_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema  # type: ignore[no-any-return]
        schema = build_openapi()
        schema.setdefault("components", {}).setdefault("securitySchemes", {})["bearerAuth"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "The cluster's REST token (its session's security/rest-token file).",
        }
        schema["security"] = [{"bearerAuth": []}]
        for path in (HEALTH_PATH, LOGIN_PATH):
            for operation in schema.get("paths", {}).get(path, {}).values():
                operation["security"] = []
        app.openapi_schema = schema
        return schema

    app.openapi = openapi
