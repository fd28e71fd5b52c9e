"""The plan form's memory settings and question (issue 13): the request's field names, the same
bounds and messages as the API, errors under their inputs, values kept on re-render."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.planning.schemas import PlanJobCreate
from app.web import forms
from tests.app.web.test_web import FORM, client, field_block  # noqa: F401 (fixture)

MEMORY_FORM = {
    "grad_reduce_dtype": "fp32,bf16",
    "optimizer_state_dtype": "bf16",
    "fp8_param_gather": "off",
    "recompute_modules": ["core_attn", "mlp"],
    "cuda_graphs": "partial",
    "recompute_num_layers": "2",
    "activation_offload_layers": "0",
    "optimizer_offload_fraction": "0, 0.5",
    "pipeline_layout": "Et*28|t*28L",
    "allow_numerics_changes": "1",
    "question": "maximize:seq_length",
}


def test_form_builds_the_api_request_with_the_same_field_names() -> None:
    values = forms.form_values(
        {k: v for k, v in (FORM | MEMORY_FORM).items() if isinstance(v, str)},
        {k: v for k, v in (FORM | MEMORY_FORM).items() if isinstance(v, list)},
    )
    req = forms.to_request(values)
    assert req["grad_reduce_dtype"] == ["fp32", "bf16"]
    assert req["optimizer_state_dtype"] == ["bf16"]
    assert req["fp8_param_gather"] is False
    assert req["recompute_modules"] == ["core_attn", "mlp"]
    assert req["optimizer_offload_fraction"] == [0.0, 0.5]
    assert req["maximize"] == "seq_length" and "minimize" not in req
    assert req["allow_numerics_changes"] is True
    typed = PlanJobCreate.model_validate(req)  # what the API takes
    assert typed.cuda_graphs == "partial" and typed.pipeline_layout == "Et*28|t*28L"
    again = forms.values_from_request(req)
    assert again["question"] == "maximize:seq_length"
    assert again["recompute_modules"] == ["core_attn", "mlp"]
    assert again["grad_reduce_dtype"] == "fp32,bf16" and again["fp8_param_gather"] == "off"


def test_home_offers_the_memory_settings_and_questions(client: TestClient) -> None:  # noqa: F811
    html = client.get("/").text
    for name in ("grad_reduce_dtype", "optimizer_offload_fraction", "pipeline_layout", "question"):
        assert f'name="{name}"' in html
    assert 'value="minimize:num_gpus"' in html and 'value="fp16"' in html
    assert 'name="recompute_modules" value="mla_up_proj"' in html


def test_bad_offload_fraction_is_an_error_under_its_input(client: TestClient) -> None:  # noqa: F811
    response = client.post("/plans", data=FORM | {"optimizer_offload_fraction": "0.5,2"})
    assert response.status_code == 422
    block = field_block(response.text, "optimizer_offload_fraction")
    assert "Optimizer offload fraction must be at most 1." in block
    assert 'aria-invalid="true"' in block
    assert 'value="0.5,2"' in block  # the value as typed stays
    response = client.post("/plans", data=FORM | {"optimizer_offload_fraction": "half"})
    assert "must be numbers from 0 to 1" in field_block(response.text, "optimizer_offload_fraction")


def test_a_negative_layer_count_says_the_least_value_the_api_takes() -> None:
    from app.web.memory_form import memory_request
    from planner.specs import SpecError

    with pytest.raises(SpecError, match="1 or more; got '-1'"):  # ge=1 in the request schema
        memory_request({"recompute_num_layers": "-1"})
    with pytest.raises(SpecError, match="0 or more; got '-1'"):
        memory_request({"activation_offload_layers": "-1"})


@pytest.mark.parametrize(
    ("field", "label"),
    [
        ("recompute_num_layers", "Full recompute: layers per chunk"),
        ("activation_offload_layers", "Activation offload layers"),
        ("optimizer_offload_fraction", "Optimizer offload fraction"),
    ],
)
def test_typed_memory_fields_are_named_by_their_label(field: str, label: str) -> None:
    """The message under the input names it as the form does, not by its request field."""
    from app.web.memory_form import memory_request
    from planner.specs import SpecError

    with pytest.raises(SpecError) as caught:
        memory_request({field: "abc"})
    assert caught.value.message.startswith(f"{label} must be")
    assert caught.value.field == field
