"""QA leftovers on the plan form: axes checked as whole numbers on the server too, the
question grouped with the objective."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.web import form_checks
from tests.app.web.test_web import FORM, client, field_block  # noqa: F401 (fixture)


def test_server_flags_a_fractional_axis_and_a_bad_list_at_once() -> None:
    errors = form_checks.check_values(FORM | {"tp": "3.5", "pp": "1,x", "cp": "1-2"})
    assert errors["tp"] == "Tensor parallel (TP) must be a whole number; you typed '3.5'."
    assert "whole numbers" in errors["pp"] and "cp" not in errors


def test_fractional_tp_post_is_a_422_under_tp(client: TestClient) -> None:  # noqa: F811
    response = client.post("/plans", data=FORM | {"tp": "3.5"})
    assert response.status_code == 422
    assert "must be a whole number" in field_block(response.text, "tp")


def test_the_question_sits_in_the_objective_group(client: TestClient) -> None:  # noqa: F811
    html = client.get("/").text
    objective = re.search(r'id="group-objective">(.*?)</fieldset>', html, re.S)
    assert objective and 'name="question"' in objective.group(1)
    assert "Memory settings and question" not in html
