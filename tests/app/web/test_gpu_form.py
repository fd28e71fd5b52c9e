"""Adding, changing and deleting a GPU type of one's own on the GPU page: the API's checks and
messages (POST/PUT/DELETE /v1/gpus), each beside its input; built-in GPUs stay read-only."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)

GOOD = {"slug": "my-gpu", "architecture": "hopper", "vendor": "nvidia", "hbm_gib": "80",
        "hbm_bandwidth_gb_s": "3350", "peak_bf16_tflop_s": "989", "peak_fp8_tflop_s": "1979",
        "intra_node_gb_s": "450", "host_link_gb_s": "", "sm_count": "132"}  # fmt: skip


def _error(page: str, name: str) -> str:
    found = re.search(rf'<p class="field-error" id="g-{name}-error">(.*?)</p>', page, re.S)
    assert found is not None, f"no error beside {name}"
    return html.unescape(found.group(1))


def test_the_gpu_page_has_the_form_with_labelled_inputs(client: TestClient) -> None:  # noqa: F811
    page = client.get("/catalog/gpus").text
    assert 'id="gpu-form"' in page and 'action="/catalog/gpus"' in page
    for name in ("slug", "architecture", "vendor", "hbm_gib", "peak_fp8_tflop_s", "sm_count"):
        assert f'<label for="g-{name}">' in page
    assert "Built-in GPU types cannot be changed" in page
    assert 'href="/catalog/gpus?copy=h100-sxm-80gb#gpu-form-box"' in page  # a built-in: Copy
    assert "/catalog/gpus?edit=h100-sxm-80gb" not in page  # ... and no Edit


def test_a_gpu_is_added_in_si_units_through_the_api_path(client: TestClient) -> None:  # noqa: F811
    r = client.post("/catalog/gpus", data=GOOD, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/catalog/gpus?saved=my-gpu"
    entry = client.get("/v1/gpus/my-gpu").json()
    spec = entry["spec"]
    assert spec["hbm_bytes"] == 80 * 2**30 and spec["hbm_bandwidth_bytes_per_s"] == 3350e9
    assert spec["peak_bf16_flop_per_s"] == 989e12 and spec["peak_fp8_flop_per_s"] == 1979e12
    assert spec["intra_node_bandwidth_bytes_per_s"] == 450e9 and spec["sm_count"] == 132
    assert spec["host_link_bandwidth_bytes_per_s"] is None and entry["metadata"] == {"via": "web"}
    page = html.unescape(client.get("/catalog/gpus?saved=my-gpu").text)
    assert "Saved <code>my-gpu</code>" in page
    assert 'href="/catalog/gpus?edit=my-gpu#gpu-form-box"' in page
    assert 'aria-label="Delete my-gpu"' in page


def test_an_empty_fp8_figure_means_no_fp8(client: TestClient) -> None:  # noqa: F811
    client.post("/catalog/gpus", data=GOOD | {"peak_fp8_tflop_s": ""})
    assert client.get("/v1/gpus/my-gpu").json()["spec"]["peak_fp8_flop_per_s"] is None


def test_bad_figures_are_named_beside_their_inputs(client: TestClient) -> None:  # noqa: F811
    data = GOOD | {"hbm_gib": "", "peak_bf16_tflop_s": "9_89", "sm_count": "13.5", "slug": "A B"}
    r = client.post("/catalog/gpus", data=data)
    assert r.status_code == 422
    assert _error(r.text, "hbm_gib").startswith("Memory (GiB) is needed")
    assert "you typed '9_89'" in _error(r.text, "peak_bf16_tflop_s")
    assert "SMs (compute units) must be a whole number" in _error(r.text, "sm_count")
    assert 'aria-invalid="true" aria-describedby="g-hbm_gib-error g-hbm_gib-hint"' in r.text
    assert 'value="9_89"' in r.text  # kept to correct
    assert _error(r.text, "slug").startswith("Name must be lower-case")  # said at once
    assert client.get("/v1/gpus").json()["items"][-1]["slug"] != "my-gpu"


def test_the_apis_own_checks_land_beside_their_inputs(client: TestClient) -> None:  # noqa: F811
    r = client.post("/catalog/gpus", data=GOOD | {"slug": "Not A Slug"})
    assert r.status_code == 422
    assert _error(r.text, "slug").startswith("Name must be lower-case letters, digits")
    r = client.post("/catalog/gpus", data=GOOD | {"hbm_bandwidth_gb_s": "0"})
    assert r.status_code == 422
    assert _error(r.text, "hbm_bandwidth_gb_s") == "HBM bandwidth (GB/s) must be positive"
    api = client.post("/v1/gpus", json={"slug": "x", "spec": {"hbm_bytes": 1,
        "hbm_bandwidth_bytes_per_s": 0, "peak_bf16_flop_per_s": 1, "peak_fp8_flop_per_s": None,
        "intra_node_bandwidth_bytes_per_s": 1}})  # fmt: skip
    assert api.json()["errors"][0]["message"] == "hbm_bandwidth_bytes_per_s must be positive"


def test_a_taken_name_points_at_the_edit_link(client: TestClient) -> None:  # noqa: F811
    client.post("/catalog/gpus", data=GOOD)
    r = client.post("/catalog/gpus", data=GOOD)
    assert r.status_code == 422
    assert "A GPU type named my-gpu exists: change it with its Edit link" in _error(r.text, "slug")
    r = client.post("/catalog/gpus", data=GOOD | {"slug": "h100-sxm-80gb"})
    assert r.status_code == 422 and "built in and read-only" in _error(r.text, "slug")


def test_a_change_prefills_the_form_and_adds_a_version(client: TestClient) -> None:  # noqa: F811
    client.post("/catalog/gpus", data=GOOD | {"hbm_gib": "79.6474609375"})
    form = html.unescape(client.get("/catalog/gpus?edit=my-gpu").text)
    assert "Change GPU type <code>my-gpu</code>" in form
    assert 'name="hbm_gib" type="text" inputmode="decimal" value="79.6474609375"' in form
    assert 'name="editing" value="my-gpu"' in form and "readonly" in form
    data = GOOD | {"editing": "my-gpu", "slug": "ignored", "hbm_gib": "79.6474609375"}
    r = client.post("/catalog/gpus", data=data | {"peak_bf16_tflop_s": "900"})
    assert r.status_code == 200  # followed the 303
    entry = client.get("/v1/gpus/my-gpu").json()
    assert entry["version"] == 2 and entry["spec"]["peak_bf16_flop_per_s"] == 900e12
    assert entry["spec"]["hbm_bytes"] == 85_520_809_984  # an untouched figure stays exact
    assert client.get("/v1/gpus/ignored").status_code == 404


def test_a_built_in_opens_only_as_a_copy(client: TestClient) -> None:  # noqa: F811
    page = html.unescape(client.get("/catalog/gpus?edit=h100-sxm-80gb").text)
    assert "Change GPU type" not in page and "Add a GPU type of your own" in page
    copy = html.unescape(client.get("/catalog/gpus?copy=h100-sxm-80gb").text)
    assert "Add a copy of <code>h100-sxm-80gb</code>" in copy
    assert 'name="slug" type="text" value="h100-sxm-80gb-copy"' in copy
    assert 'name="editing"' not in copy
    r = client.post("/catalog/gpus", data=GOOD | {"editing": "h100-sxm-80gb"})
    assert r.status_code == 422 and "read-only" in _error(r.text, "slug")


def test_delete_refuses_a_gpu_a_cluster_uses_with_the_apis_message(client: TestClient) -> None:  # noqa: F811
    client.post("/catalog/gpus", data=GOOD)
    cluster = {"slug": "my-dgx", "gpu": "my-gpu", "gpus_per_node": "8", "topology": "switch"}
    assert client.post("/catalog/clusters", data=cluster).status_code == 200
    r = client.post("/catalog/gpus/my-gpu/delete", data={"confirm": "1"})
    assert r.status_code == 409
    api = client.delete("/v1/gpus/my-gpu").json()["detail"]
    assert f"Not deleted: {api}" in html.unescape(r.text)
    assert client.get("/v1/gpus/my-gpu").status_code == 200
    client.post("/catalog/clusters/my-dgx/delete", data={"confirm": "1"})
    r = client.post("/catalog/gpus/my-gpu/delete", data={"confirm": "1"}, follow_redirects=False)
    assert r.status_code == 303 and client.get("/v1/gpus/my-gpu").status_code == 404


def test_several_errors_are_announced_with_their_count(client: TestClient) -> None:  # noqa: F811
    r = client.post("/catalog/gpus", data=GOOD | {"hbm_gib": "", "sm_count": "x"})
    assert (
        '<p class="form-error error-summary" role="alert" id="gpu-error-summary">2 fields to '
        in r.text
    )
    r = client.post("/catalog/clusters", data={"slug": "A", "gpu": "h100-sxm-80gb"})
    assert 'role="alert" id="cluster-error-summary">2 fields to fix' in r.text
    assert "error-summary" not in client.get("/catalog/gpus").text
