"""The calibration page names a CSV's unknown columns and the required ones it lacks (QA fix8
item 3), in the page's terms, instead of "row 1: hidden_size is missing"."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)

CSV = b"model,gpus,tp,pp,tokens\nllama3.1-8b,8,1,1,9000\n"


def test_a_csv_with_unknown_columns_says_which_and_what_is_missing(
    client: TestClient,  # noqa: F811
) -> None:
    page = client.post(
        "/calibration", data={"cluster": "dgx-h100"}, files={"file": ("runs.csv", CSV, "text/csv")}
    )
    assert page.status_code == 422
    message = page.text[page.text.index('id="file-error"') :].split("</p>")[0]
    assert "hidden_size is missing" not in message
    assert "lacks the required columns the model (model_name" in message
    assert "micro_batch_size, global_batch_size, seq_length" in message
    assert "gpus, model, tokens are not columns of measured-throughput.csv" in message
    assert "gpu_type" not in message  # the cluster preset gives the GPU
