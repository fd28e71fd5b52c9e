"""Every operation of the OpenAPI document (/docs) sits under exactly one tag: a route that
inherits its router's tag and adds its own shows twice in Swagger UI (``DELETE
/v1/clusters/{slug}`` was listed under both "calibration" and "catalog")."""

from __future__ import annotations

from fastapi.testclient import TestClient

METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def test_every_operation_has_exactly_one_tag(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    wrong = {
        f"{method.upper()} {path}": operation.get("tags", [])
        for path, item in paths.items()
        for method, operation in item.items()
        if method in METHODS and len(operation.get("tags", [])) != 1
    }
    assert not wrong, wrong


def test_deleting_a_cluster_is_a_catalog_operation(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/clusters/{slug}"]["delete"]
    assert operation["tags"] == ["catalog"]
