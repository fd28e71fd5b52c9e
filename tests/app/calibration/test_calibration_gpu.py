"""A calibration describes the GPU it was fitted on. A cluster that names another GPU later (a
PUT: calibrations are kept by slug) plans with that GPU's shipped profile, not with the old
GPU's fit; switching back finds the fit again. Deleting the cluster deletes its fits only when
asked (``?purge=true``), so a cluster re-created under the slug starts uncalibrated."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.calibration.models import CalibrationRow
from app.calibration.repository import CalibrationRepository
from app.planning.service import resolve_references

A100 = {
    "hbm_bytes": 80 * 2**30,
    "hbm_bandwidth_bytes_per_s": 2.039e12,
    "peak_bf16_flop_per_s": 312e12,
    "peak_fp8_flop_per_s": None,
    "intra_node_bandwidth_bytes_per_s": 300e9,
}


def _profile_of(client: TestClient) -> Any:
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session:
        _, resolved = resolve_references(session, {"model": "llama3.1-70b", "cluster": "mine"})
    return resolved.get("profile")


def test_a_calibration_applies_only_while_the_cluster_has_its_gpu(client: TestClient) -> None:
    assert client.post("/v1/gpus", json={"slug": "my-a100", "spec": A100}).status_code == 201
    cluster = {"slug": "mine", "spec": {"gpu": "h100-sxm-80gb"}}
    assert client.post("/v1/clusters", json=cluster).status_code == 201
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session:
        fit = CalibrationRow(
            cluster_slug="mine", num_measurements=8, profile={"gpu": "h100-sxm-80gb"}, report={}
        )
        CalibrationRepository(session).add(fit)
        session.commit()
        fit_id = fit.id
    assert _profile_of(client)["calibration_id"] == fit_id
    moved = client.put("/v1/clusters/mine", json={"spec": {"gpu": "my-a100"}})
    assert moved.status_code == 200, moved.text
    assert _profile_of(client) is None  # the H100 fit said nothing about this GPU
    back = client.put("/v1/clusters/mine", json={"spec": {"gpu": "h100-sxm-80gb"}})
    assert back.status_code == 200, back.text
    assert _profile_of(client)["calibration_id"] == fit_id  # the same GPU again: its fit
    assert client.delete("/v1/clusters/mine").status_code == 409  # it has a calibration
    assert client.delete("/v1/clusters/mine?purge=true").status_code == 204
    assert client.post("/v1/clusters", json=cluster).status_code == 201
    assert _profile_of(client) is None  # a new cluster of the old name: no old fit
