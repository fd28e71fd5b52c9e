"""The plan page's memory heading names the most loaded GPU as the API reports it: the first or
the last stage, or the middle pipeline rank a pipeline_layout made the heaviest."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.app.web.test_web import client, fake, submit, wait_done  # noqa: F401  (fixture)


def _heading(client: TestClient) -> str:  # noqa: F811
    location = submit(client)
    wait_done(client, location)
    html = client.get(f"{location}/1").text
    start = html.index('<h2 id="memory-title">')
    return html[start : html.index("</h2>", start)]


def test_the_first_stage_is_named_when_it_is_the_heaviest(client: TestClient) -> None:  # noqa: F811
    assert _heading(client).endswith("Memory per GPU, first stage (the most loaded)")


def test_a_middle_rank_is_named_by_its_rank(
    client: TestClient,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = fake._plan

    def middle(rank: int) -> dict[str, Any]:
        doc = plain(rank)
        doc["memory"] = {**doc["memory"], "worst_stage": "middle", "worst_rank": 1}
        return doc

    monkeypatch.setattr(fake, "_plan", middle)
    heading = _heading(client)
    assert heading.endswith("Memory per GPU, pipeline rank 1 of 4 (the most loaded)")
    assert "first" not in heading
