"""An empty measurements upload is said to be empty, whatever its Content-Type (QA round 9: no
body read "not JSON: Expecting value: line 1 column 1 (char 0)", an empty CSV "lacks the
required columns ...", an empty log "not a Megatron-LM log")."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize(
    "headers", [{}, {"Content-Type": "text/csv"}, {"Content-Type": "text/plain"}]
)
@pytest.mark.parametrize("body", [b"", b" \n\n"])
def test_an_empty_upload_is_a_422_saying_it_is_empty(
    client: TestClient, headers: dict[str, str], body: bytes
) -> None:
    r = client.post("/v1/clusters/dgx-h100/measurements", content=body, headers=headers)
    assert r.status_code == 422
    [error] = r.json()["errors"]
    assert error["field"] == "body"
    assert error["message"].startswith("the body is empty: send JSON rows, a CSV file")
    assert client.get("/v1/clusters/dgx-h100/measurements").json()["items"] == []
