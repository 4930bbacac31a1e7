"""The API page (docs/http.md, `GET /api/docs`): Swagger UI whose every asset the app serves itself
from a package, so it renders with the network cut; on under `serve`, off under the Functions
host unless `ApiDocs__Enabled` turns it on."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Literal
from urllib.parse import urljoin, urlsplit

import pytest
from fastapi.testclient import TestClient

from shared.settings import SettingsError, load_settings
from tests.support.hosts import make_app

BASE = "http://testserver"


class _References(HTMLParser):
    """Every URL the page asks a browser to load: src and href attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def _client(host: Literal["api", "function"] = "api", **settings: str) -> TestClient:
    app = make_app(load_settings(settings), db_url="sqlite://", host=host)
    return TestClient(app)


def test_the_page_and_every_asset_it_references_come_from_the_app_itself() -> None:
    client = _client()
    page = client.get("/api/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    refs = _References()
    refs.feed(page.text)
    # The document the page reads is named in its script, not in an attribute.
    (document,) = re.findall(r"url: '([^']+)'", page.text)
    urls = [urljoin(f"{BASE}/api/docs", u) for u in [*refs.urls, document]]
    assert len(urls) == 4, urls  # stylesheet, icon, script, document
    for url in urls:
        # Same origin only: nothing from a CDN, so an offline machine renders the same page.
        assert urlsplit(url).netloc == "testserver", url
        answer = client.get(url)
        assert answer.status_code == 200, url
        assert answer.content, url
    css = client.get("/api/docs/swagger-ui.css").text
    # The stylesheet's own references are inline (data:) or none.
    assert all(u.strip("'\"").startswith("data:") for u in re.findall(r"url\(([^)]*)\)", css))
    assert client.get(document).json()["openapi"].startswith("3.")


def test_the_page_tells_the_browser_to_load_nothing_from_another_origin() -> None:
    page = _client().get("/api/docs")
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self' 'unsafe-inline'" in policy
    # Swagger UI's default validator badge is an image from an outside service.
    assert '"validatorUrl": null' in page.text


@pytest.mark.parametrize("name", ["index.html", "swagger-initializer.js", "..%2Fswagger_ui_bundle"])
def test_only_the_assets_the_page_loads_are_served(name: str) -> None:
    answer = _client().get(f"/api/docs/{name}")
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["errorCode"] == "NOT_FOUND"


def test_the_page_is_off_under_the_functions_host_and_so_is_its_document() -> None:
    client = _client("function")
    for path in ("/api/docs", "/api/docs/swagger-ui-bundle.js", "/api/openapi.json"):
        assert client.get(path).status_code == 404, path
    assert client.get("/api/health").status_code == 200


def test_the_setting_turns_the_page_on_under_the_functions_host() -> None:
    client = _client("function", ApiDocs__Enabled="true")
    assert client.get("/api/docs").status_code == 200
    assert client.get("/api/openapi.json").status_code == 200


def test_the_setting_turns_the_page_off_under_serve_and_leaves_the_document() -> None:
    client = _client(ApiDocs__Enabled="false")
    assert client.get("/api/docs").status_code == 404
    assert client.get("/api/openapi.json").status_code == 200


def test_a_value_that_is_no_boolean_is_refused_naming_the_key() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"ApiDocs__Enabled": "sometimes"})
    assert "ApiDocs__Enabled" in str(refused.value)
    assert "set ApiDocs__Enabled to true or false" in str(refused.value)
