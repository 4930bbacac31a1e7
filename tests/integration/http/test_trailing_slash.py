"""A path with a trailing slash is 404 NOT_FOUND on every route, never a redirect: Starlette's
slash redirect builds its Location from the request's Host header, so a caller could make the
API send a client anywhere (`Host: evil.example` → 307 to http://evil.example/api/health)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.support.hosts import host_settings, make_app, served_routes

ROUTES = served_routes()


def test_every_operation_and_the_document_are_walked() -> None:
    paths = {path for _, path in ROUTES}
    assert {"/api/health", "/api/accounts", "/api/pin", "/api/openapi.json"} <= paths


@pytest.mark.parametrize(("method", "path"), ROUTES, ids=[f"{m} {p}" for m, p in ROUTES])
def test_a_trailing_slash_is_404_not_found_never_a_redirect_to_the_host_header(
    sqlite_url: str, method: str, path: str
) -> None:
    app = make_app(host_settings(sqlite_url))
    with TestClient(app, raise_server_exceptions=True) as client:
        response = client.request(
            method, path + "/", headers={"Host": "evil.example"}, follow_redirects=False
        )
    assert response.status_code == 404, (response.status_code, response.headers)
    assert "location" not in response.headers
    assert response.json()["errorCode"] == "NOT_FOUND"
    assert "evil.example" not in response.text
