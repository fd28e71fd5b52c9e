"""A batch job's name is a cell of the results CSV and a label on the web page: a name a
spreadsheet would run as a formula ("=HYPERLINK(...)", CSV injection) or one hiding a control
or format character (U+202E turns the shown text around) is a 422 naming ``jobs.N.name``."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.batches.test_batches import GOOD


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ('=HYPERLINK("http://x","y")', "must not start with '=': a spreadsheet opening"),
        ("@SUM(A1)", "must not start with '@'"),
        ("llama\u202e46-b07", "the invisible character U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("zero\u200bwidth", "the invisible character U+200B (ZERO WIDTH SPACE)"),
    ],
)
def test_a_formula_or_hidden_character_in_a_name_is_a_422(
    client: TestClient, name: str, says: str
) -> None:
    response = client.post("/v1/batches", json={"jobs": [{**GOOD, "name": name}]})
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["field"] == "jobs.0.name" and says in error["message"]
    assert client.get("/v1/batches").json()["total"] == 0


def test_names_in_other_scripts_are_kept(client: TestClient) -> None:
    names = ["llama-70b-64", "Größe 2", "模型-一", "نموذج"]
    response = client.post("/v1/batches", json={"jobs": [{**GOOD, "name": n} for n in names]})
    assert response.status_code == 202, response.text
    assert [job["name"] for job in response.json()["jobs"]] == names
