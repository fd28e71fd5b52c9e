"""The plan form's software stack and cluster description (issue 12 items 1-2): the request's
field names, errors under their inputs (NICs without a rate, a bandwidth that disagrees), values
kept on re-render."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app
from app.planning.schemas import PlanJobCreate
from app.planning.stack_fields import STACK_FIELDS
from app.web import forms
from tests.app.web.test_web import FORM, client, field_block  # noqa: F401 (fixture)

STACK_FORM = {
    "tp_comm_overlap": "off",
    "attention_backend": "flash",
    "cross_entropy_fusion": "te",
    "moe_imbalance": "1.0",
    "megatron_core_version": "0.18",
    "te_version": "2.5",
    "nics_per_node": "4",
    "nic_bandwidth_bytes_per_s": "50e9",
    "intra_node_topology": "mesh",
}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The app with the real planning backend: the planner's own checks answer the form."""
    folder: Path = tmp_path_factory.mktemp("stack-form")
    settings = Settings(data_dir=folder, database_url=f"sqlite:///{folder}/planner.db", workers=1)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def _request(posted: dict[str, Any]) -> dict[str, Any]:
    strings = {k: v for k, v in posted.items() if isinstance(v, str)}
    lists = {k: v for k, v in posted.items() if isinstance(v, list)}
    return forms.to_request(forms.form_values(strings, lists))


def test_form_builds_the_api_request_and_shows_it_again() -> None:
    req = _request(FORM | STACK_FORM)
    assert req["tp_comm_overlap"] is False and req["attention_backend"] == "flash"
    assert req["cross_entropy_fusion"] == "te" and req["moe_imbalance"] == 1.0
    assert req["nics_per_node"] == 4 and req["nic_bandwidth_bytes_per_s"] == 50e9
    assert req["intra_node_topology"] == "mesh"
    assert (req["megatron_core_version"], req["te_version"]) == ("0.18", "2.5")
    PlanJobCreate.model_validate(req)  # what the API takes
    again = forms.values_from_request(req)
    assert {k: again[k] for k in STACK_FORM} == STACK_FORM | {
        "moe_imbalance": "1.0",
        "nic_bandwidth_bytes_per_s": "50000000000.0",
    }


def test_defaults_leave_the_request_to_the_planner() -> None:
    req = _request(FORM)
    assert not {s.name for s in STACK_FIELDS} & set(req)
    assert "intra_node_topology" not in req and "nics_per_node" not in req


def test_home_offers_every_stack_descriptor_and_the_cluster_group(
    client: TestClient,  # noqa: F811
) -> None:
    html = client.get("/").text
    for spec in STACK_FIELDS:
        assert f'name="{spec.name}"' in html
    for name in ("nics_per_node", "nic_bandwidth_bytes_per_s", "intra_node_topology"):
        assert f'name="{name}"' in html
    assert "--tp-comm-overlap" in html  # the help names the Megatron flag
    # the releases: the newest by default, every known one and the NeMo containers listed
    assert '<option value="" selected>newest (0.19)</option>' in html
    assert '<option value="24.09"' in html and '<option value="1.11"' in html


@pytest.mark.parametrize(
    ("posted", "field", "words"),
    [
        ({"nics_per_node": "8"}, "nic_bandwidth_bytes_per_s", "required with NICs per node"),
        ({"nics_per_node": "8", "nic_bandwidth_bytes_per_s": "50e9",
          "inter_node_bandwidth_bytes_per_s": "25e9"}, "inter_node_bandwidth_bytes_per_s",
         "disagrees"),
        ({"moe_imbalance": "0.5"}, "moe_imbalance", "MoE load imbalance must be at least 1."),
        ({"moe_imbalance": "lots"}, "moe_imbalance", "must be a number"),
        ({"nics_per_node": "2.5"}, "nics_per_node", "whole number"),
        ({"cross_entropy_fusion": "te", "megatron_core_version": "0.18", "te_version": "2.1"},
         "cross_entropy_fusion", "needs Transformer Engine &gt;= 2.2"),
        ({"megatron_core_version": "0.2"}, "megatron_core_version", "use 0.4 to 0.19"),
    ],
)  # fmt: skip
def test_bad_value_is_an_error_under_its_input(
    real: TestClient, posted: dict[str, str], field: str, words: str
) -> None:
    response = real.post("/plans", data=FORM | posted)
    assert response.status_code == 422
    block = field_block(response.text, field)
    assert words in block and 'aria-invalid="true"' in block


def test_cluster_catalog_describes_the_network_in_words(real: TestClient) -> None:
    html = real.get("/catalog/clusters").text
    assert "NICs per node" in html and "NIC rate" in html and "Inside a node" in html
    assert "mesh (direct links)" in html and "NVSwitch" in html
    assert "nics per node" not in html and "intra_node_topology" not in html


def test_a_bad_number_gets_the_bandwidth_hint_only_on_a_bandwidth() -> None:
    from app.web.stack_form import stack_request
    from planner.specs import SpecError

    with pytest.raises(SpecError, match=r"moe_imbalance must be a number \(.*50e9\); you typed"):
        stack_request({"moe_imbalance": "abc"})
    with pytest.raises(SpecError, match=r"exponent, such as 50e9 \(50 GB/s\)\); you typed 'x'"):
        stack_request({"nic_bandwidth_bytes_per_s": "x"})
