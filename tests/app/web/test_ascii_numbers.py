"""Only plain ASCII decimal is a number on any page: '٣' (an Arabic-Indic three), '1_000', '²',
'0x10' and 'inf' are refused beside their field, naming the field and the accepted form
(app/web/numbers.py), on the plan, scaling, cluster, GPU and batch forms alike."""

from __future__ import annotations

import html

import pytest
from fastapi.testclient import TestClient

from app.web import numbers
from tests.app.web.test_batch_page import HEADER, stored, upload
from tests.app.web.test_web import FORM, client, field_block  # noqa: F401 (fixture)

ODD = ("٣", "1_000", "²", "0x10", "inf", "nan", "1e999", "", " ", "1,5", "+-1")


@pytest.mark.parametrize("text", ODD)
def test_the_parsers_refuse_what_is_not_ascii_decimal(text: str) -> None:
    assert numbers.read_whole(text) is None
    assert numbers.read_decimal(text) is None


@pytest.mark.parametrize(
    ("text", "value"), [("8", 8.0), (" 50e9 ", 50e9), (".5", 0.5), ("1.", 1.0), ("-2E-3", -2e-3)]
)
def test_the_parsers_read_plain_decimal(text: str, value: float) -> None:
    assert numbers.read_decimal(text) == value
    assert numbers.read_whole("0042") == 42 and numbers.read_whole("4.0") is None


def test_the_refusal_names_the_field_and_the_accepted_form() -> None:
    assert numbers.refusal("Token budget", "1_000", whole=False) == (
        "Token budget must be a number (ASCII digits with an optional '.' and exponent, such as "
        "50, 0.5 or 50e9); you typed '1_000'."
    )
    assert numbers.refusal("TP", "٣", whole=True) == (
        "TP must be a whole number (ASCII digits 0-9 only, such as 8); you typed '٣'."
    )


@pytest.mark.parametrize(
    ("name", "text", "label"),
    [
        ("token_budget", "1_000", "Token budget must be a number (ASCII digits"),
        ("usd_per_gpu_hour", "٣", "Price per GPU-hour must be a number (ASCII digits"),
        ("seq_length", "4_096", "Sequence length must be a whole number (ASCII digits 0-9"),
        ("tp", "٢", "must be a whole number (ASCII digits 0-9"),
    ],
)
def test_the_plan_form_refuses_them_beside_the_field(
    client: TestClient,  # noqa: F811
    name: str,
    text: str,
    label: str,
) -> None:
    r = client.post("/plans", data=FORM | {name: text})
    assert r.status_code == 422
    block = html.unescape(field_block(r.text, name))
    assert label in block and f"you typed '{text}'" in block


@pytest.mark.parametrize(
    ("name", "text"),
    [("moe_imbalance", "1_0"), ("nic_bandwidth_bytes_per_s", "5_0e9"), ("nics_per_node", "٨")],
)
def test_the_plan_forms_advanced_numbers_refuse_them(
    client: TestClient,  # noqa: F811
    name: str,
    text: str,
) -> None:
    r = client.post("/plans", data=FORM | {name: text})
    assert r.status_code == 422
    assert f"you typed '{text}'" in html.unescape(field_block(r.text, name))


def test_an_offload_fraction_in_another_script_is_refused(client: TestClient) -> None:  # noqa: F811
    r = client.post("/plans", data=FORM | {"optimizer_offload_fraction": "٠.5"})
    assert r.status_code == 422
    assert "in ASCII digits" in html.unescape(field_block(r.text, "optimizer_offload_fraction"))


def test_the_scaling_page_refuses_them(client: TestClient) -> None:  # noqa: F811
    r = client.get("/scaling", params={"run": "1", "usd_per_gpu_hour": "2_5"})
    assert r.status_code == 422
    assert "must be a number (ASCII digits" in html.unescape(r.text)


@pytest.mark.parametrize(("name", "text"), [("nic_bandwidth_gb_s", "5_0"), ("nics_per_node", "٨")])
def test_the_cluster_form_refuses_them(client: TestClient, name: str, text: str) -> None:  # noqa: F811
    data = {"slug": "my-dgx", "gpu": "h100-sxm-80gb", "gpus_per_node": "8", "topology": "switch"}
    r = client.post("/catalog/clusters", data=data | {name: text})
    assert r.status_code == 422
    text_html = html.unescape(r.text)
    assert f'id="c-{name}-error">' in text_html and "(ASCII digits" in text_html
    assert client.get("/v1/clusters/my-dgx").status_code == 404


def test_a_batch_cell_spelled_with_a_separator_is_refused(client: TestClient) -> None:  # noqa: F811
    body = f"{HEADER},usd_per_gpu_hour\nx,llama3.1-8b,h100-sxm-80gb,16,8,4096,1_024,٢.5\n"
    r = upload(client, "jobs.csv", body)
    assert r.status_code == 422
    page = html.unescape(r.text)
    assert "row 1 (x, line 2), column global_batch_size: global_batch_size must be a whole " in page
    assert "column usd_per_gpu_hour: usd_per_gpu_hour must be a number (ASCII" in page
    assert stored(client) == (0, 0)


def test_a_batch_word_cell_is_left_to_the_requests_own_check(client: TestClient) -> None:  # noqa: F811
    r = upload(client, "jobs.csv", f"{HEADER}\nx,llama3.1-8b,h100-sxm-80gb,many,8,4096,128\n")
    assert "column num_gpus: num_gpus must be a whole number, got" in html.unescape(r.text)
