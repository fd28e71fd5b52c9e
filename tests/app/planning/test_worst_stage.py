"""The memory report names the most loaded stage truthfully when a pipeline_layout charges every
rank: a middle rank is "middle" with its rank, not "first", in the API, the CLI and the SDK."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.app.planning.interfaces import evaluate_everywhere

pytestmark = pytest.mark.usefixtures("no_server_database")

# llama3.1-8b's 32 layers, the middle ranks heavier than the embedding and the loss ranks
LAYOUT = {"model": "llama3.1-8b", "gpu": "h100-sxm-80gb", "num_gpus": 32, "seq_length": 4096,
          "global_batch_size": 256, "pp": 4, "pipeline_layout": "Et*2|t*14|t*14|t*2L"}  # fmt: skip


def test_a_middle_rank_is_reported_as_middle_with_its_rank(
    real_client: TestClient, tmp_path: Path
) -> None:
    # the API, the CLI's --json (flags and --input) and the SDK give the same answer
    memory = evaluate_everywhere(real_client, LAYOUT, tmp_path)["memory"]
    stages = memory["stage_bytes"]
    heaviest = max(range(len(stages)), key=lambda k: stages[k])
    assert 0 < heaviest < len(stages) - 1  # the case under test: neither end
    assert (memory["worst_stage"], memory["worst_rank"]) == ("middle", heaviest)
    assert memory["total_bytes"] == stages[heaviest]


def test_the_ends_keep_first_and_last(real_client: TestClient) -> None:
    ends = {**LAYOUT, "pipeline_layout": "Et*14|t*2|t*2|t*14L"}
    memory = real_client.post("/v1/evaluations", json=ends).json()["memory"]
    stages = memory["stage_bytes"]
    expected = "first" if stages[0] >= stages[-1] else "last"
    assert memory["worst_stage"] == expected
    assert memory["worst_rank"] == (0 if expected == "first" else len(stages) - 1)
