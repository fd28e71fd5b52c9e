"""The plan form's messages as a first-time user reads them (QA round 8): a field's message
agrees with its bounds and uses the label on the page; one error is "the message beside it"."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.app.web.test_web import FORM, client, field_block  # noqa: F401 (fixture)


@pytest.mark.parametrize("typed", ["0", "abc"])
def test_recompute_layers_message_states_the_least_value_the_api_takes(
    client: TestClient,  # noqa: F811
    typed: str,
) -> None:
    """It said "0 or more" for a word, then refused 0 as "Recompute num layers" (ge=1)."""
    response = client.post("/plans", data=FORM | {"recompute_num_layers": typed})
    assert response.status_code == 422
    block = field_block(response.text, "recompute_num_layers")
    assert "Full recompute: layers per chunk" in block
    assert "0 or more" not in block and "Recompute num layers" not in block


def test_activation_offload_layers_still_takes_zero_or_more(client: TestClient) -> None:  # noqa: F811
    response = client.post("/plans", data=FORM | {"activation_offload_layers": "x"})
    assert "Activation offload layers must be a whole number, 0 or more" in field_block(
        response.text, "activation_offload_layers"
    )


def test_one_server_error_is_summed_up_in_the_singular(client: TestClient) -> None:  # noqa: F811
    response = client.post("/plans", data=FORM | {"seq_length": "abc"})
    assert response.status_code == 422
    assert "1 field to fix: see the message beside it." in response.text
    two = client.post("/plans", data=FORM | {"seq_length": "abc", "top_k": "x"})
    assert "2 fields to fix: see the messages beside them." in two.text


def test_an_upload_that_is_not_text_is_named_with_what_to_upload(client: TestClient) -> None:  # noqa: F811
    """It said "the body is not UTF-8 text": the API's words, about no file the user chose."""
    xlsx = b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00\xff\xfe"
    page = client.post(
        "/calibration",
        data={"cluster": "dgx-h100"},
        files={"file": ("runs.csv", xlsx, "text/csv")},
    )
    assert page.status_code == 422
    block = page.text[page.text.index('id="file-error"') :]
    assert "runs.csv is not UTF-8 text" in block.split("</p>")[0]
    assert "the body" not in page.text


def test_an_empty_config_asks_for_one_and_a_long_name_is_told_the_limit(
    client: TestClient,  # noqa: F811
) -> None:
    empty = client.post("/catalog/models", data={"name": "x1", "config_json": "  "})
    assert empty.status_code == 422
    assert "paste the model&#39;s config.json" in field_block(empty.text, "config_json")
    config = '{"model_type": "llama", "hidden_size": 64}'
    long = client.post(
        "/catalog/models", data={"name": "a" * 300, "config_json": config, "store": "1"}
    )
    assert long.status_code == 422
    error = field_block(long.text, "name").split('id="name-error">')[1]
    assert "at most 128 characters" in error and "a" * 61 not in error  # the name is shortened


@pytest.mark.parametrize("price", ["0", "-3"])
def test_a_price_of_zero_or_less_says_more_than_zero(client: TestClient, price: str) -> None:  # noqa: F811
    """0 was "Price per GPU-hour=0.0 must be a positive number" while -3 was "between 0 and
    10,000", which 0 is."""
    response = client.post("/plans", data=FORM | {"usd_per_gpu_hour": price})
    assert response.status_code == 422
    block = field_block(response.text, "usd_per_gpu_hour")
    assert "Price per GPU-hour must be more than 0 and at most 10,000." in block
