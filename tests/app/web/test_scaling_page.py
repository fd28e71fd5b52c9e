"""The scaling page's form (QA leftovers 1 and 2): each mistake under its own field in plain
words, all at once; model and GPU chosen from the catalog like on the plan form."""

from __future__ import annotations

import html as html_lib
import re

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)


def _error(html: str, name: str) -> str | None:
    found = re.search(rf'id="{name}-error">([^<]*)<', html)
    return html_lib.unescape(found.group(1)) if found else None


def test_every_bad_field_is_flagged_under_itself(client: TestClient) -> None:  # noqa: F811
    query = "run=1&seq_length=-1&token_budget=NaN&usd_per_gpu_hour=-3&num_gpus=64-x"
    response = client.get(f"/scaling?{query}")
    assert response.status_code == 422
    html = response.text
    assert _error(html, "seq_length") == "Sequence length must be between 1 and 1,048,576."
    assert _error(html, "token_budget") == (
        "Token budget must be a number (ASCII digits with an optional '.' and exponent, such as "
        "50, 0.5 or 50e9); you typed 'NaN'."
    )
    price = "Price per GPU-hour must be more than 0 and at most 10,000."  # 0 is refused too
    assert _error(html, "usd_per_gpu_hour") == price
    assert "GPU counts must be whole numbers" in (_error(html, "num_gpus") or "")
    assert _error(html, "model") is None and _error(html, "global_batch_size") is None
    assert "4 fields to fix" in html
    assert "Input should" not in html and ";" not in (_error(html, "seq_length") or "")


def test_model_and_gpu_are_menus_of_the_catalog(client: TestClient) -> None:  # noqa: F811
    html = client.get("/scaling").text
    assert re.search(r'<select id="model" name="model"', html)
    assert re.search(r'<option value="llama3.1-70b" selected>', html)
    assert re.search(r'<select id="gpu" name="gpu"', html)
    assert '<option value="h100-sxm-80gb" selected>' in html


def test_an_unknown_model_in_the_url_is_named(client: TestClient) -> None:  # noqa: F811
    response = client.get("/scaling?run=1&model=nope&num_gpus=8-16")
    assert response.status_code == 422
    assert "choose a model from the menu" in (_error(response.text, "model") or "")
    assert '<option value="nope" selected>nope (unknown)</option>' in response.text
