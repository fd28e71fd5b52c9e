"""The error page said a malformed address's one error twice, the field named three times:
'rank: Input should be ...' then '<code>rank</code>: rank: Input should be ...' (web11)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.app.web.test_web import build_app


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(build_app(tmp_path)) as c:
        yield c


def test_one_bad_part_of_an_address_is_said_once(client: TestClient) -> None:
    response = client.get("/plans/x/abc", headers={"Accept": "text/html"})
    assert response.status_code == 422
    page = response.text
    assert page.count("Input should be a valid integer") == 1, page
    assert "<li>rank: Input should be a valid integer" in page
    assert "rank: rank:" not in page
