"""Digits Python's ``str.isdigit`` takes but ``int`` refuses ('²') reached ``int`` on the pages'
paths (a fixed TP, a list of TPs, the runs to suggest, a batch cell, the scaling GPU counts)
and answered 500; each is now the field's own message."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.batches.jobs_file import parse_jobs
from tests.app.web.test_web import FORM, client, field_block  # noqa: F401 (fixture)


@pytest.mark.parametrize(("field", "typed"), [("tp", "²"), ("tp", "1,²"), ("pp", "²-4"),
                                              ("recompute_num_layers", "²")])  # fmt: skip
def test_a_superscript_digit_in_the_plan_form_is_the_fields_error(
    client: TestClient,  # noqa: F811
    field: str,
    typed: str,
) -> None:
    response = client.post("/plans", data=FORM | {field: typed})
    assert response.status_code == 422
    assert "whole number" in field_block(response.text, field)


@pytest.mark.parametrize("field", ["k", "max_nodes"])
def test_a_superscript_run_count_is_the_suggest_forms_error(
    client: TestClient,  # noqa: F811
    field: str,
) -> None:
    data = {"request": '{"model": "llama3.1-8b"}', "k": "3", "max_nodes": "", field: "²"}
    response = client.post("/calibration/suggest", data=data)
    assert response.status_code == 422
    assert "whole number" in response.text


def test_a_superscript_gpu_count_on_the_scaling_page_is_its_error(
    client: TestClient,  # noqa: F811
) -> None:
    query = {"run": "1", "model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": "8,²",
             "seq_length": "4096", "global_batch_size": "128"}  # fmt: skip
    response = client.get("/scaling", params=query)
    assert response.status_code in (200, 422)
    assert "GPU counts must be whole numbers" in response.text


def test_a_superscript_batch_cell_stays_text_for_the_row_check() -> None:
    found = parse_jobs("name,num_gpus\na,²\nb,16\n", "csv", source="jobs.csv")
    assert [job["num_gpus"] for job in found.jobs] == ["²", 16]
