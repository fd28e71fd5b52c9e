"""The software stack and the cluster description in every interface (issue 12 items 1-2): the
same fields, bounds and messages in the API, CLI flags, ``--input`` lines, batch CSV columns and
the SDK, the same answers from each, and inconsistent network input refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app.cli import cli
from app.planning.compute import plan_request
from app.planning.schemas import EvaluationRequest
from app.planning.stack_fields import STACK_FIELDS, job_stack
from app.sdk import ClusterPresetSpec, PlannerAPIError, PlannerClient
from tests.app.planning.interfaces import batch_rows, evaluate_everywhere, flags

pytestmark = pytest.mark.usefixtures("no_server_database")
runner = CliRunner()
JOB = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 16, "seq_length": 4096,
       "global_batch_size": 64}  # fmt: skip
LAYOUT = {"tp": 4, "micro_batch_size": 1, "recompute": "selective"}
STACK = {"tp_comm_overlap": False, "attention_backend": "flash", "cross_entropy_fusion": "te",
         "moe_imbalance": 1.0, "moe_grouped_gemm_kernel": "grouped",
         "megatron_core_version": "0.18", "te_version": "2.14"}  # fmt: skip
CLUSTER = {"nics_per_node": 2, "nic_bandwidth_bytes_per_s": 50e9, "intra_node_topology": "switch"}


def sdk_for(client: TestClient) -> PlannerClient:
    return PlannerClient("http://testserver", transport=client._transport)


def test_descriptors_carry_the_planners_defaults() -> None:
    request = EvaluationRequest.model_validate({**JOB})
    defaults = {**request.model_dump(), **job_stack(request)}  # None = by the job's release
    assert {s.name: defaults[s.name] for s in STACK_FIELDS} == {
        "tp_comm_overlap": True, "attention_backend": "auto", "cross_entropy_fusion": "native",
        "moe_imbalance": 1.2, "expandable_segments": False, "cp_comm_type": None,
        "moe_grouped_gemm_kernel": None, "megatron_core_version": None, "te_version": None,
        "fp8_recipe": None,
    }  # fmt: skip
    # an environment variable or a release, not a Megatron flag
    env = ("moe_imbalance", "expandable_segments", "moe_grouped_gemm_kernel", "te_version")
    assert all("--" in s.help for s in STACK_FIELDS if s.name not in env)


def test_evaluation_agrees_in_api_cli_input_and_sdk(
    tmp_path: Path, real_client: TestClient
) -> None:
    request = {**JOB, **LAYOUT, **STACK, **CLUSTER}
    from_api = evaluate_everywhere(real_client, request, tmp_path)
    command = from_api["megatron"]["command"]
    assert "--attention-backend flash" in command and "--cross-entropy-fusion-impl te" in command
    assert "--tp-comm-overlap" not in command and "--moe-router-force-load-balancing" not in command
    # the stack and the network change the answer: exposed TP collectives, 2 NICs per 8 GPUs
    plain = real_client.post("/v1/evaluations", json={**JOB, **LAYOUT}).json()
    assert "--tp-comm-overlap" in plain["megatron"]["command"]
    speed = from_api["performance"]["tokens_per_s_per_gpu"]
    assert speed < plain["performance"]["tokens_per_s_per_gpu"]
    nics_only = {**JOB, **LAYOUT, **CLUSTER}
    slower = real_client.post("/v1/evaluations", json=nics_only).json()["performance"]
    per_gpu = {**JOB, **LAYOUT, "inter_node_bandwidth_bytes_per_s": 2 * 50e9 / 8}
    same = real_client.post("/v1/evaluations", json=per_gpu).json()["performance"]
    assert slower == same  # NICs x rate / GPUs per node is the per-GPU bandwidth
    assert slower["tokens_per_s_per_gpu"] < plain["performance"]["tokens_per_s_per_gpu"]


def test_plan_agrees_in_cli_batch_and_service(tmp_path: Path) -> None:
    request = {**JOB, **STACK, **CLUSTER, "tp": 4, "recompute": ["selective"], "top_k": 2}
    service = json.loads(json.dumps(plan_request(request).raw))  # as the API sends it
    result = runner.invoke(cli, ["plan", *flags(request), "--json"])
    assert result.exit_code == 0, result.output
    from_cli = json.loads(result.stdout)
    rows = batch_rows(request, tmp_path)
    assert len(rows) == 2
    for a, b, r in zip(service["plans"], from_cli["plans"], rows, strict=True):
        assert a["layout"] == b["layout"]
        assert a["megatron"]["command"] == b["megatron"]["command"] == r["megatron_command"]
        speed = a["performance"]["tokens_per_s_per_gpu"]
        assert float(r["tokens_per_s_per_gpu"]) == round(speed, 1)
        assert "--attention-backend flash" in r["megatron_command"]


def test_cp_comm_type_in_api_cli_input_and_sdk(tmp_path: Path, real_client: TestClient) -> None:
    layout = {"tp": 4, "cp": 2, "micro_batch_size": 1}
    request = {**JOB, **layout, "cp_comm_type": "a2a"}
    from_api = evaluate_everywhere(real_client, request, tmp_path)
    assert "--cp-comm-type a2a" in from_api["megatron"]["command"]
    ring = real_client.post("/v1/evaluations", json={**JOB, **layout}).json()
    assert "--cp-comm-type" not in ring["megatron"]["command"]  # p2p: Megatron's default
    assert ring["performance"] != from_api["performance"]
    plan = {**JOB, "tp": 4, "cp": 2, "cp_comm_type": "all_gather", "top_k": 2}
    result = runner.invoke(cli, ["plan", *flags(plan), "--json"])
    assert result.exit_code == 0, result.output
    for p in json.loads(result.stdout)["plans"]:
        assert p["layout"]["cp_comm_type"] == "all_gather"
        assert "--cp-comm-type all_gather" in p["megatron"]["command"]


BAD = [
    ({"moe_imbalance": 0.5}, "moe_imbalance", "greater than or equal to 1"),
    ({"attention_backend": "flsh"}, "attention_backend", "flash"),
    ({"cross_entropy_fusion": "fused"}, "cross_entropy_fusion", "native"),
    ({"moe_grouped_gemm_kernel": "cutlass"}, "moe_grouped_gemm_kernel", "multi_stream"),
    ({"intra_node_topology": "ring"}, "intra_node_topology", "mesh"),
    ({"megatron_core_version": "0.3"}, "megatron_core_version", "use 0.4 to 0.19"),
    ({"te_version": "two"}, "te_version", "write major.minor"),
    ({"cp": 2, "cp_comm_type": "a2a", "te_version": "1.10"}, "cp_comm_type",
     "needs Transformer Engine >= 1.11"),
    ({"cross_entropy_fusion": "te"}, "cross_entropy_fusion", "<= 0.18"),
    ({"cuda_graphs": "full_iteration", "megatron_core_version": "24.09"}, "cuda_graphs",
     "Megatron-Core >= 0.14"),
    ({"cp": 2, "cp_comm_type": "allgather"}, "cp_comm_type", "all_gather"),
    ({"fp8_recipe": "tensorwise"}, "fp8_recipe", "applies to fp8 training only"),
    ({"precision": "fp8", "fp8_recipe": "current"}, "fp8_recipe", "tensorwise"),
    ({"precision": "fp8", "fp8_recipe": "mxfp8"}, "fp8_recipe", "Blackwell GPUs only"),
    ({"precision": "fp8", "fp8_recipe": "blockwise", "te_version": "2.2"}, "fp8_recipe",
     "Transformer Engine >= 2.3"),
    ({"nics_per_node": 8}, "nic_bandwidth_bytes_per_s", "required with nics_per_node"),
    ({"nic_bandwidth_bytes_per_s": 50e9}, "nics_per_node", "required with"),
    (
        {"nics_per_node": 8, "nic_bandwidth_bytes_per_s": 50e9,
         "inter_node_bandwidth_bytes_per_s": 25e9},
        "inter_node_bandwidth_bytes_per_s",
        "disagrees",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("bad", "field", "words"), BAD)
def test_bad_value_names_the_field_in_every_interface(
    tmp_path: Path, real_client: TestClient, bad: dict[str, Any], field: str, words: str
) -> None:
    request = {**JOB, "tp": 4, **bad}
    for path in ("/v1/evaluations", "/v1/plan-jobs"):
        response = real_client.post(path, json=request)
        assert response.status_code == 422, (path, response.text)
        error = response.json()["errors"][0]
        assert error["field"] == field and words in error["message"], (path, error)
    with sdk_for(real_client) as sdk, pytest.raises(PlannerAPIError) as raised:
        sdk.evaluate(request)
    assert raised.value.errors[0]["field"] == field
    for command in ("evaluate", "plan"):
        result = runner.invoke(cli, [command, *flags(request)])
        assert result.exit_code == 2, result.output
        assert "--" + field.replace("_", "-") in result.output and words in result.output
    lines = tmp_path / "in.jsonl"
    lines.write_text(json.dumps(request) + "\n", encoding="utf-8")
    result = runner.invoke(cli, ["evaluate", "--input", str(lines), "--json"])
    assert json.loads(result.stdout)["error"]["field"] == field
    (row,) = batch_rows(request, tmp_path)
    assert field in row["error"] and row["rank"] == ""


def test_user_cluster_describes_its_network(real_client: TestClient) -> None:
    spec = ClusterPresetSpec(
        gpu="h100-sxm-80gb", gpus_per_node=8, nics_per_node=4, nic_bandwidth_bytes_per_s=50e9
    )
    with sdk_for(real_client) as sdk:
        created = sdk.create_cluster("four-nic-h100", spec)
    stored = created["spec"]
    assert stored["nics_per_node"] == 4 and stored["inter_node_bandwidth_bytes_per_s"] == 25e9
    shown = real_client.get("/v1/clusters/four-nic-h100").json()["spec"]
    assert shown == stored
    on_cluster = {**JOB, **LAYOUT, "gpu": None, "cluster": "four-nic-h100"}
    inline = {**JOB, **LAYOUT, "nics_per_node": 4, "nic_bandwidth_bytes_per_s": 50e9}
    a = real_client.post("/v1/evaluations", json=on_cluster).json()
    b = real_client.post("/v1/evaluations", json=inline).json()
    assert a["performance"] == b["performance"]
    # the request's own per-GPU bandwidth replaces the cluster's NICs, it does not disagree
    faster = {**on_cluster, "inter_node_bandwidth_bytes_per_s": 50e9}
    assert real_client.post("/v1/evaluations", json=faster).status_code == 200
    old = {"gpu": "h100-sxm-80gb", "inter_node_bandwidth_bytes_per_s": 25e9}  # no new keys
    assert real_client.post("/v1/clusters", json={"slug": "old", "spec": old}).status_code == 201


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"nics_per_node": 8}, "spec.nic_bandwidth_bytes_per_s"),
        ({"nics_per_node": 8, "nic_bandwidth_bytes_per_s": 50e9,
          "inter_node_bandwidth_bytes_per_s": 25e9}, "spec.inter_node_bandwidth_bytes_per_s"),
        ({"intra_node_topology": "torus"}, "spec.intra_node_topology"),
    ],
)  # fmt: skip
def test_bad_user_cluster_names_the_field(
    real_client: TestClient, spec: dict[str, Any], field: str
) -> None:
    body = {"slug": "bad-net", "spec": {"gpu": "h100-sxm-80gb", **spec}}
    response = real_client.post("/v1/clusters", json=body)
    assert response.status_code == 422 and response.json()["errors"][0]["field"] == field


def test_presets_describe_their_network_with_sources() -> None:
    import models_db

    for slug in models_db.list_clusters():
        preset = models_db.load_cluster_preset(slug)
        assert preset.nics_per_node and preset.nic_bandwidth_bytes_per_s, slug
        for name in ("nics_per_node", "nic_bandwidth_bytes_per_s", "intra_node_topology"):
            assert preset.sources.get(name), (slug, name)
        spec = preset.spec(preset.gpus_per_node)
        assert spec.inter_node_bandwidth_bytes_per_s == preset.inter_node_bandwidth_bytes_per_s
    assert models_db.load_cluster_preset("mi300x-8x").intra_node_topology == "mesh"
    assert models_db.load_cluster_preset("v100-sxm2-4x").intra_node_topology == "mesh"
    # 64 GPUs of an NVL72 rack keep the rack's network per GPU
    rack = models_db.cluster_spec("gb200-nvl72", 128, 64)
    assert rack.inter_node_bandwidth_bytes_per_s == 50e9


@pytest.mark.parametrize(
    "node", [{}, {"gpus_per_node": 4}, {"inter_node_bandwidth_bytes_per_s": 1e10}]
)
def test_a_preset_resolves_the_same_with_and_without_the_service(
    real_client: TestClient, node: dict[str, Any]
) -> None:
    """One path for a cluster's name: the planner-only conversion (no database) gives the
    cluster the service gives, the preset's per-GPU network kept for another node size."""
    from app.planning.convert import builtin_cluster, inline_cluster, parse_request, resolve_cluster
    from app.planning.service import resolve_references

    body = {**JOB, **LAYOUT, "gpu": None, "cluster": "dgx-h100", **node}
    alone = resolve_cluster(parse_request(EvaluationRequest, body), 16)
    session = real_client.app.state.session_factory()  # type: ignore[attr-defined]
    try:
        served, _ = resolve_references(session, {k: v for k, v in body.items() if v is not None})
    finally:
        session.close()
    via_service = resolve_cluster(parse_request(EvaluationRequest, served), 16)
    assert alone == via_service
    preset = builtin_cluster("dgx-h100")
    per_gpu = node.get(
        "inter_node_bandwidth_bytes_per_s", preset["inter_node_bandwidth_bytes_per_s"]
    )
    assert alone.inter_node_bandwidth_bytes_per_s == pytest.approx(per_gpu)
    assert alone.gpus_per_node == node.get("gpus_per_node", 8)
    assert "cluster" not in inline_cluster(body, preset)


def test_the_fp8_recipe_is_launched_priced_and_reported(real_client: TestClient) -> None:
    fp8 = {**JOB, **LAYOUT, "precision": "fp8"}
    default = real_client.post("/v1/evaluations", json=fp8).json()
    block = real_client.post("/v1/evaluations", json={**fp8, "fp8_recipe": "blockwise"}).json()
    assert "--fp8-recipe tensorwise" in default["megatron"]["command"]  # Hopper's default
    assert "--fp8-recipe blockwise" in block["megatron"]["command"]
    assert block["performance"]["step_time_s"] > default["performance"]["step_time_s"]
    answer = json.loads(json.dumps(plan_request({**JOB, "precision": "fp8", "top_k": 1}).raw))
    assert answer["plans"][0]["run"]["fp8_recipe"] == "tensorwise"  # the plan says what it ran
    bf16 = json.loads(json.dumps(plan_request({**JOB, "top_k": 1}).raw))
    assert bf16["plans"][0]["run"]["fp8_recipe"] is None
