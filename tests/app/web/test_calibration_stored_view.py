"""A saved calibration's page is a read (issue 12): what the page shows is stored with the fit
(``calibration.comparison``), the API answers the same, and a calibration stored before the
column existed gets it computed once, on its first view."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

import app.calibration.fit as calibration_fit
from app.calibration.models import CalibrationRow
from tests.app.web.test_reload_safe import CLUSTER, _upload
from tests.app.web.test_web import client  # noqa: F401 (fixture)


def _saved(client: TestClient) -> str:  # noqa: F811
    assert client.post("/v1/clusters", json={"slug": "my-h100", "spec": CLUSTER}).status_code == 201
    r: Any = _upload(client, save="1")
    assert r.status_code == 303
    return str(r.headers["location"])


def _saved_before_0006(
    client: TestClient,  # noqa: F811
    change: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] = lambda p, r: {},
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A saved calibration as one stored before migration 0006 left it (no comparison), with
    ``change(profile, report)``'s columns set too: its page's URL, its profile and report."""
    location = _saved(client)
    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    with factory() as session:
        row = session.query(CalibrationRow).one()
        profile, report = dict(row.profile), dict(row.report)
        values = {"comparison": None, **change(profile, report)}
        session.execute(update(CalibrationRow).values(**values))
        session.commit()
    return location, profile, report


def _chart(text: str) -> dict[str, Any]:
    found = re.search(r'data-chart-for="calibration-chart">(.*?)</script>', text, flags=re.S)
    assert found, text[:500]
    return dict(json.loads(found.group(1)))


def _count_fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = calibration_fit.calibrate_gpu_rows

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(calibration_fit, "calibrate_gpu_rows", counted)
    return calls


def test_a_saved_calibrations_page_fits_nothing(
    client: TestClient,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    location = _saved(client)
    fits = _count_fits(monkeypatch)
    for _ in range(2):
        page = client.get(location)
        assert page.status_code == 200, page.text[:500]
        assert 'id="fit-errors"' in page.text
    assert fits == []
    # the API reads the same stored comparison
    calibration_id = location.rsplit("/", 1)[1]
    api = client.get(f"/v1/clusters/my-h100/calibrations/{calibration_id}")
    assert api.status_code == 200, api.text
    body = api.json()
    assert body["comparison"]["chart"] == _chart(page.text)
    assert body["comparison"]["n_rows"] == len(body["comparison"]["chart"]["after"]) > 0
    assert fits == []


def test_the_stored_comparison_is_the_fit_of_the_stored_rows(client: TestClient) -> None:  # noqa: F811
    """What was stored at save time equals a fresh fit of the same rows (fit_preview)."""
    location = _saved(client)
    calibration_id = location.rsplit("/", 1)[1]
    stored = client.get(f"/v1/clusters/my-h100/calibrations/{calibration_id}").json()
    rows = [m["data"] for m in client.get("/v1/clusters/my-h100/measurements").json()["items"]]
    fresh = json.loads(json.dumps(calibration_fit.fit_preview(rows, CLUSTER["gpu"])))
    for key in ("chart", "before", "after", "cv", "coefficients", "n_rows", "gpu"):
        assert stored["comparison"][key] == fresh[key], key


def test_an_older_calibration_is_compared_once_on_its_first_view(
    client: TestClient,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    location, _, _ = _saved_before_0006(client)
    fits = _count_fits(monkeypatch)
    first = client.get(location)
    assert first.status_code == 200 and 'id="fit-errors"' in first.text
    assert fits == []  # from the stored profile (test below), not a fit again
    second = client.get(location)
    assert fits == [] and _chart(second.text) == _chart(first.text)
    with client.app.state.session_factory() as session:  # type: ignore[attr-defined]
        stored = session.query(CalibrationRow).one().comparison
    assert stored is not None and stored["chart"] == _chart(first.text)


def test_an_unknown_calibration_is_a_404_in_the_api_too(client: TestClient) -> None:  # noqa: F811
    client.post("/v1/clusters", json={"slug": "my-h100", "spec": CLUSTER})
    r = client.get("/v1/clusters/my-h100/calibrations/99")
    assert r.status_code == 404
    assert "has no calibration 99" in r.text


def test_an_older_calibrations_page_shows_its_own_profile_not_a_refit(
    client: TestClient,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The profile a calibration stored is the one planning uses; a fit run again today (with
    the fitting code of a later release) may give another, so the first view of an older
    calibration predicts the rows with the stored profile, fitting none."""

    def slower(p: dict[str, Any], r: dict[str, Any]) -> dict[str, Any]:
        return {"profile": {**p, "gemm_efficiency": 0.5 * p["gemm_efficiency"]}}

    location, saved, report = _saved_before_0006(client, slower)  # a fit that gave another
    profile = slower(saved, report)["profile"]
    rows = [m["data"] for m in client.get("/v1/clusters/my-h100/measurements").json()["items"]]
    fits = _count_fits(monkeypatch)
    page = client.get(location)
    assert page.status_code == 200, page.text[:500]
    assert fits == []
    expected = calibration_fit.fitted_comparison(rows, str(CLUSTER["gpu"]), profile, report)
    assert _chart(page.text)["after"] == expected["chart"]["after"]
    assert _chart(page.text)["after"] != _chart(page.text)["before"]


def test_a_calibration_older_than_the_honest_report_is_fitted_again_once(
    client: TestClient,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A report stored before the honest fit carries no errors to show: its page fits again."""
    location, _, _ = _saved_before_0006(
        client,
        lambda p, r: {
            "report": {k: v for k, v in r.items() if k not in ("fit", "cross_validation")}
        },
    )
    fits = _count_fits(monkeypatch)
    page = client.get(location)
    assert page.status_code == 200 and 'id="fit-errors"' in page.text, page.text[:500]
    assert len(fits) == 1
    assert client.get(location).status_code == 200 and len(fits) == 1


def test_an_older_calibration_is_compared_on_the_gpu_it_was_fitted_on(
    client: TestClient,  # noqa: F811
) -> None:
    """A cluster moved to another GPU keeps its calibrations (they apply again if it moves
    back): the first view of an older one compares its rows on its own GPU, not a 422."""
    location, _, _ = _saved_before_0006(client)
    moved = client.put("/v1/clusters/my-h100", json={"spec": {**CLUSTER, "gpu": "h200-sxm-141gb"}})
    assert moved.status_code == 200, moved.text
    calibration_id = location.rsplit("/", 1)[1]
    api = client.get(f"/v1/clusters/my-h100/calibrations/{calibration_id}")
    assert api.status_code == 200, api.text
    assert api.json()["comparison"]["n_rows"] > 0
    assert api.json()["comparison"]["gpu"] == CLUSTER["gpu"]
    assert client.get(location).status_code == 200


def test_a_saved_calibrations_page_names_it_and_selects_its_cluster(client: TestClient) -> None:  # noqa: F811
    # web11's walk: every calibration page was titled "Calibration", and the stored-runs select
    # offered the first cluster (dgx-a100-40gb) after saving one for my-h100
    page = client.get(_saved(client)).text
    title = re.search(r"<title>(.*?)</title>", page, flags=re.S)
    assert title and re.match(r"Calibration \d+ of my-h100 ", title.group(1)), title
    select = re.search(r'<select id="delete_cluster".*?</select>', page, flags=re.S)
    assert select and 'value="my-h100" selected' in select.group(0), select
