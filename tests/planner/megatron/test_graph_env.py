"""Launch environment and notes of the stack: TE graphs under expandable segments need
NCCL_GRAPH_REGISTER=0 (mechanisms-facts §3.4), now that the search picks graphs by itself
(stack_choice); the grouped expert kernel states the TE/cuBLASLt it needs (§4.1)."""

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


def test_grouped_expert_kernel_states_the_stack_it_needs() -> None:
    from tests.planner.fixtures import MIXTRAL_8X7B

    layout = Layout(tp=2, ep=8, dp=4, sequence_parallel=True)
    grouped = TrainingJob(seq_length=4096, global_batch_size=64, moe_grouped_gemm_kernel="grouped")
    notes = launch_spec(MIXTRAL_8X7B, HOSTED, grouped, layout).notes
    assert any("Transformer Engine >= 2.13" in n and "cuBLASLt >= 13.3" in n for n in notes)
    default = TrainingJob(seq_length=4096, global_batch_size=64)
    assert not any("13.3" in n for n in launch_spec(MIXTRAL_8X7B, HOSTED, default, layout).notes)
