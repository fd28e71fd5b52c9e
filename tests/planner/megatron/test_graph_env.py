"""CUDA graphs under expandable segments: TE's graph path needs NCCL_GRAPH_REGISTER=0
(mechanisms-facts §3.4), now that the search picks graphs by itself (stack_choice)."""

from __future__ import annotations

import pytest

from planner import TrainingJob, launch_spec
from planner.specs import Layout
from tests.planner.fixtures import LLAMA_8B
from tests.planner.memory.test_settings import HOSTED


@pytest.mark.parametrize(
    ("graphs", "expandable", "register_off"),
    [
        ("partial", True, True),  # --cuda-graph-impl transformer_engine
        ("partial", False, False),
        ("none", True, False),
        ("full_iteration", True, False),  # MCore's wrapper, not the TE path the fact names
    ],
)
def test_te_graphs_with_expandable_segments_turn_nccl_graph_registration_off(
    graphs: str, expandable: bool, register_off: bool
) -> None:
    job = TrainingJob(seq_length=4096, global_batch_size=64, expandable_segments=expandable)
    spec = launch_spec(LLAMA_8B, HOSTED, job, Layout(dp=8, cuda_graphs=graphs))  # type: ignore[arg-type]
    assert (spec.env.get("NCCL_GRAPH_REGISTER") == "0") is register_off
    assert ("NCCL_GRAPH_REGISTER=0" in spec.command) is register_off
