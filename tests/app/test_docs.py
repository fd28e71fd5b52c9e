"""/docs and /redoc work offline: they reference only the vendored files under /static, which are
served, and stay open when API-key auth is on."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

SECRET = "Zq3v9Lr2Wm8Kx1Tb7Nc4Hd6Pf0Gj5Ys-RuAeIoQ"
URL_ATTR = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""")


def referenced_urls(html: str) -> list[str]:
    return URL_ATTR.findall(html)


def assert_offline_page(client: TestClient, path: str, expected: set[str]) -> None:
    response = client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert "http://" not in html and "https://" not in html, html
    assert "cdn" not in html.lower()
    urls = set(referenced_urls(html))
    assert expected <= urls, urls
    for url in urls:
        assert url.startswith("/"), url
        if url.startswith("/static/"):
            served = client.get(url)
            assert served.status_code == 200, url
            assert served.content, url


@pytest.fixture
def secured(make_client: Callable[..., TestClient]) -> TestClient:
    return make_client(auth="api-key", secret_key=SECRET)


def test_swagger_ui_uses_only_vendored_files(client: TestClient) -> None:
    assert_offline_page(
        client,
        "/docs",
        {
            "/openapi.json",
            "/static/vendor/swagger-ui-bundle-5.35.0.js",
            "/static/vendor/swagger-ui-5.35.0.css",
            "/static/vendor/swagger-ui-favicon-32x32.png",
        },
    )
    assert (
        client.get("/static/vendor/swagger-ui-bundle-5.35.0.js")
        .headers["content-type"]
        .startswith(("application/javascript", "text/javascript"))
    )
    assert (
        client.get("/static/vendor/swagger-ui-5.35.0.css")
        .headers["content-type"]
        .startswith("text/css")
    )


def test_redoc_uses_only_vendored_files(client: TestClient) -> None:
    assert_offline_page(
        client, "/redoc", {"/openapi.json", "/static/vendor/redoc-2.5.4.standalone.js"}
    )


def test_docs_routes_are_not_in_the_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert not any(p.startswith(("/docs", "/redoc")) for p in paths)


def test_docs_are_open_with_api_key_auth(secured: TestClient) -> None:
    assert secured.get("/v1/models").status_code == 401  # auth is on
    for path in ("/docs", "/redoc", "/openapi.json", "/static/vendor/swagger-ui-bundle-5.35.0.js"):
        assert secured.get(path).status_code == 200, path
