"""A reload (F5) of a page a POST answered does no harm (POST/redirect/GET): a saved
calibration, a confirmed delete of stored runs, a model added from its config.json. Each POST
that stores or deletes answers 303 to a page that reads what was stored; a reload reads again."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)

EXAMPLE_ROWS = Path(__file__).parents[3] / "examples" / "measurements.csv"
CLUSTER = {"gpu": "h100-sxm-80gb", "gpus_per_node": 8, "inter_node_bandwidth_bytes_per_s": 5e10}
CONFIG = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 4, "hidden_size": 1024,
          "intermediate_size": 4096, "num_attention_heads": 16, "num_key_value_heads": 4,
          "vocab_size": 32000, "max_position_embeddings": 4096}  # fmt: skip


def _counts(client: TestClient, slug: str = "my-h100") -> tuple[int, int]:  # noqa: F811
    measured = client.get(f"/v1/clusters/{slug}/measurements").json()["items"]
    return len(measured), len(client.get(f"/v1/clusters/{slug}/calibrations").json()["items"])


def _upload(client: TestClient, **form: str) -> object:  # noqa: F811
    files = {"file": ("runs.csv", EXAMPLE_ROWS.read_bytes(), "text/csv")}
    data = {"cluster": "my-h100"} | form
    return client.post("/calibration", data=data, files=files, follow_redirects=False)


def test_a_saved_calibration_lands_on_a_page_that_reads_it_back(client: TestClient) -> None:  # noqa: F811
    assert client.post("/v1/clusters", json={"slug": "my-h100", "spec": CLUSTER}).status_code == 201
    r = _upload(client, save="1")
    assert r.status_code == 303  # type: ignore[attr-defined]
    location = r.headers["location"]  # type: ignore[attr-defined]
    calibration = client.get("/v1/clusters/my-h100/calibrations").json()["items"][0]["id"]
    assert location == f"/calibration/my-h100/calibrations/{calibration}"
    stored = _counts(client)
    assert stored[1] == 1 and stored[0] >= 1
    for _ in range(2):  # the page, and its reload: read, never stored again
        page = client.get(location)
        assert page.status_code == 200
        text = html.unescape(page.text)
        assert f"Saved as calibration {calibration} of my-h100" in text
        assert "reloading it stores nothing again" in text
        assert 'id="fit-errors"' in text and 'id="calibration-chart"' in text
    assert _counts(client) == stored


def test_a_preview_without_save_stores_nothing_and_says_so(client: TestClient) -> None:  # noqa: F811
    client.post("/v1/clusters", json={"slug": "my-h100", "spec": CLUSTER})
    r = _upload(client)
    assert r.status_code == 200  # type: ignore[attr-defined]
    assert "Nothing was stored" in html.unescape(r.text)  # type: ignore[attr-defined]
    assert _counts(client) == (0, 0)


def test_an_unknown_calibration_page_is_a_404_that_says_why(client: TestClient) -> None:  # noqa: F811
    client.post("/v1/clusters", json={"slug": "my-h100", "spec": CLUSTER})
    r = client.get("/calibration/my-h100/calibrations/99")
    assert r.status_code == 404
    assert "has no calibration 99" in html.unescape(r.text)


def test_a_confirmed_delete_of_stored_runs_redirects(client: TestClient) -> None:  # noqa: F811
    client.post("/v1/clusters", json={"slug": "my-h100", "spec": CLUSTER})
    _upload(client, save="1")
    n = _counts(client)[0]
    data = {"cluster": "my-h100", "confirm": "my-h100"}
    r = client.post("/calibration/measurements/delete", data=data, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"].startswith("/calibration?rows_deleted=my-h100&measured=")
    _upload(client, save="1")  # rows stored after the delete (another tab, the API)
    page = html.unescape(client.get(r.headers["location"]).text)  # the reload: a GET
    assert f"Deleted {n} stored measurements and 1 calibration of my-h100" in page
    assert _counts(client) == (n, 1)  # the reload deleted nothing


def test_a_model_added_from_its_config_lands_on_a_page_that_reads_it(client: TestClient) -> None:  # noqa: F811
    import json

    data = {"name": "tiny-llama", "config_json": json.dumps(CONFIG), "store": "1"}
    r = client.post("/catalog/models", data=data, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/catalog/models?added=tiny-llama"
    for _ in range(2):  # the page and its reload: no "already in the catalog" error
        page = client.get(r.headers["location"])
        text = html.unescape(page.text)
        assert page.status_code == 200 and "Added <code>tiny-llama</code> to the catalog" in text
        assert '<th scope="row">hidden_size</th><td><code>1024</code>' in text
        assert "already in the catalog" not in text
    assert client.get("/v1/models/tiny-llama").json()["version"] == 1


def test_a_confirmed_delete_of_detached_runs_redirects(client: TestClient) -> None:  # noqa: F811
    from tests.app.web.test_detached_page import _detach

    _detach(client)
    data = {"former": "my-dgx", "confirm": "my-dgx"}
    r = client.post("/calibration/detached/delete", data=data, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/calibration?detached_deleted=my-dgx&measured=3&fitted=1"
    page = html.unescape(client.get(r.headers["location"]).text)  # the reload: a GET
    assert "Deleted 3 detached measurements and 1 calibration of the deleted cluster my-dgx" in page
