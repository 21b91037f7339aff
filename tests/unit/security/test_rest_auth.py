"""The REST security middleware and login routes, on an ASGI app in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.websockets import WebSocket, WebSocketDisconnect

from yarnflink.common.config import Configuration
from yarnflink.security import SecurityConfigError
from yarnflink.security.rest import install_rest_security

from .conftest import material


def make_app(conf: Configuration) -> FastAPI:
    app = FastAPI()
    install_rest_security(app, conf)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, e: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"errors": [str(e.detail)]}, status_code=e.status_code)

    @app.get("/overview")
    async def overview() -> dict:
        return {"taskmanagers": 1}

    @app.patch("/jobs/{jobid}")
    async def cancel(jobid: str) -> dict:
        return {}

    @app.post("/jobs")
    async def submit(request: Request) -> dict:
        return {"size": len(await request.body())}

    return app


@pytest.fixture
def conf(tmp_path: Path) -> Configuration:
    c = material(tmp_path / "security")
    c.set("rest.server.max-content-length", "1 kb")
    return c


@pytest.fixture
def token(conf: Configuration) -> str:
    return Path(conf.get("security.rest.token-file")).read_text().strip()


@pytest.fixture
def client(conf: Configuration) -> TestClient:
    return TestClient(make_app(conf), base_url="http://127.0.0.1:8081")


def test_requests_need_the_bearer_token(client: TestClient, token: str) -> None:
    r = client.get("/overview")
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert "token" in r.json()["errors"][0]
    for bad in ("Bearer nope", f"Basic {token}", f"Bearer {token}x", "Bearer"):
        assert client.get("/overview", headers={"authorization": bad}).status_code == 401
    assert client.get("/overview", headers={"authorization": f"Bearer {token}"}).json() == {"taskmanagers": 1}
    for path in ("/openapi.json", "/docs", "/redoc", "/no-such-path"):
        assert client.get(path).status_code == 401, path
    assert client.get("/health").json() == {"status": "ok"}


def test_openapi_declares_the_bearer_scheme(client: TestClient, token: str) -> None:
    spec = client.get("/openapi.json", headers={"authorization": f"Bearer {token}"}).json()
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert spec["security"] == [{"bearerAuth": []}]
    assert spec["paths"]["/health"]["get"]["security"] == []


def test_browser_login_sets_a_cookie_that_is_not_the_token(client: TestClient, token: str) -> None:
    page = client.get("/jobs/overview?x=1", headers={"accept": "text/html"})
    assert page.status_code == 401 and '<form method="post" action="/login">' in page.text
    assert 'value="/jobs/overview?x=1"' in page.text
    assert client.post("/login", data={"token": "wrong"}).status_code == 401
    r = client.post("/login", data={"token": token, "next": "//evil.example/"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/"  # no open redirect
    cookie = r.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    assert token not in cookie
    assert client.get("/overview").status_code == 200  # the client keeps the cookie
    # state changes with the cookie only from the same origin (CSRF)
    assert client.patch("/jobs/" + "a" * 32, headers={"origin": "http://evil.example"}).status_code == 403
    assert client.patch("/jobs/" + "a" * 32, headers={"origin": "http://127.0.0.1:8081"}).status_code == 200
    assert client.post("/logout").status_code == 200
    client.cookies.clear()
    assert client.get("/overview").status_code == 401


def test_json_login_for_scripts(client: TestClient, token: str) -> None:
    assert client.post("/login", json={"token": "x"}).status_code == 401
    assert client.post("/login", content=b"{not json", headers={"content-type": "application/json"}).status_code == 401
    assert client.post("/login", json={"token": token}).status_code == 200
    assert client.get("/overview").status_code == 200


def test_bodies_are_limited_before_and_while_reading(client: TestClient, token: str) -> None:
    auth = {"authorization": f"Bearer {token}"}
    assert client.post("/jobs", content=b"x" * 1024, headers=auth).json() == {"size": 1024}
    r = client.post("/jobs", content=b"x" * 1025, headers=auth)
    assert r.status_code == 413 and "rest.server.max-content-length" in r.json()["errors"][0]

    def chunks():  # no Content-Length: counted while read
        for _ in range(4):
            yield b"x" * 400

    r = client.post("/jobs", content=chunks(), headers=auth)
    assert r.status_code == 413 and "max-content-length" in r.json()["errors"][0]
    r = client.patch("/jobs/" + "a" * 32, content=b"x" * 2000, headers=auth)
    assert r.status_code == 413
    # unauthenticated: refused before the body is looked at
    assert client.post("/jobs", content=b"x" * 5000).status_code == 401


def test_authentication_none_is_explicit(tmp_path: Path) -> None:
    c = TestClient(make_app(Configuration({"security.rest.authentication": "none"})))
    assert c.get("/overview").status_code == 200
    with pytest.raises(SecurityConfigError, match="security.rest.token-file is not set"):
        make_app(Configuration())


def test_websockets_need_credentials_too(conf: Configuration, token: str) -> None:
    app = make_app(conf)

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        await socket.send_text("hello")
        await socket.close()

    client = TestClient(app)
    with pytest.raises(WebSocketDisconnect):
        with client.websocket_connect("/ws") as s:
            s.receive_text()
    with client.websocket_connect("/ws", headers={"authorization": f"Bearer {token}"}) as s:
        assert s.receive_text() == "hello"
