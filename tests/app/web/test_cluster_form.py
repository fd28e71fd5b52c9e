"""Adding and changing a cluster of one's own on the clusters page (POST/PUT /v1/clusters's
checks and messages, each beside its input); built-in presets stay read-only."""

from __future__ import annotations

import html

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)

GOOD = {"slug": "my-dgx", "gpu": "h100-sxm-80gb", "gpus_per_node": "8",
        "inter_node_bandwidth_gb_s": "", "nics_per_node": "8", "nic_bandwidth_gb_s": "50",
        "topology": "switch"}  # fmt: skip


def test_a_cluster_is_added_with_its_network_in_bytes(client: TestClient) -> None:  # noqa: F811
    r = client.post("/catalog/clusters", data=GOOD, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/catalog/clusters?saved=my-dgx"
    spec = client.get("/v1/clusters/my-dgx").json()["spec"]
    assert spec["nics_per_node"] == 8 and spec["nic_bandwidth_bytes_per_s"] == 50e9
    assert spec["inter_node_bandwidth_bytes_per_s"] == 50e9
    page = html.unescape(client.get("/catalog/clusters?saved=my-dgx").text)
    assert "Saved <code>my-dgx</code>" in page
    assert 'href="/catalog/clusters?edit=my-dgx#cluster-form-box"' in page


def test_bad_numbers_are_named_beside_their_inputs(client: TestClient) -> None:  # noqa: F811
    data = GOOD | {"gpus_per_node": "1.5", "nic_bandwidth_gb_s": "1e309", "slug": "Bad Name"}
    r = client.post("/catalog/clusters", data=data)
    assert r.status_code == 422
    text = html.unescape(r.text)
    assert 'id="c-gpus_per_node-error">GPUs per node must be a whole number' in text
    assert 'id="c-nic_bandwidth_gb_s-error">NIC rate (GB/s) must be a number above 0' in text
    assert 'id="c-slug-error">Name must be lower-case' in text
    assert client.get("/v1/clusters/bad-name").status_code == 404


def test_the_services_own_check_lands_beside_its_input(client: TestClient) -> None:  # noqa: F811
    r = client.post("/catalog/clusters", data=GOOD | {"gpus_per_node": "100000"})
    assert r.status_code == 422
    assert 'id="c-gpus_per_node-error">' in r.text


def test_a_taken_name_points_at_the_edit_link(client: TestClient) -> None:  # noqa: F811
    client.post("/catalog/clusters", data=GOOD)
    r = client.post("/catalog/clusters", data=GOOD)
    assert r.status_code == 422
    assert "A cluster named my-dgx exists: change it with its Edit link" in html.unescape(r.text)
    r = client.post("/catalog/clusters", data=GOOD | {"slug": "dgx-h100"})
    assert r.status_code == 422  # a built-in's name is taken too


def test_a_change_prefills_the_form_and_adds_a_version(client: TestClient) -> None:  # noqa: F811
    client.post("/catalog/clusters", data=GOOD)
    form = html.unescape(client.get("/catalog/clusters?edit=my-dgx").text)
    assert "Change cluster <code>my-dgx</code>" in form
    assert 'name="nic_bandwidth_gb_s" type="text" inputmode="decimal" value="50"' in form
    data = GOOD | {"editing": "my-dgx", "gpus_per_node": "4", "nics_per_node": "4"}
    r = client.post("/catalog/clusters", data=data, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert client.get("/v1/clusters/my-dgx").json()["spec"]["gpus_per_node"] == 4


def test_a_built_in_preset_opens_no_change(client: TestClient) -> None:  # noqa: F811
    page = client.get("/catalog/clusters?edit=dgx-h100").text
    assert "Add a cluster of your own" in page
    r = client.post("/catalog/clusters", data=GOOD | {"editing": "dgx-h100"})
    assert r.status_code == 422
    assert "read-only" in html.unescape(r.text)


def test_a_change_keeps_what_the_form_does_not_show(client: TestClient) -> None:  # noqa: F811
    spec = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_latency_s": 3e-5}
    assert client.post("/v1/clusters", json={"slug": "api-dgx", "spec": spec}).status_code == 201
    data = GOOD | {"slug": "api-dgx", "editing": "api-dgx", "nics_per_node": "",
                   "nic_bandwidth_gb_s": "", "inter_node_bandwidth_gb_s": "25"}  # fmt: skip
    r = client.post("/catalog/clusters", data=data, follow_redirects=False)
    assert r.status_code == 303, r.text
    stored = client.get("/v1/clusters/api-dgx").json()["spec"]
    assert stored["inter_node_latency_s"] == 3e-5
    assert stored["inter_node_bandwidth_bytes_per_s"] == 25e9
