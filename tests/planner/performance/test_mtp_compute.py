"""The MTP block in the step time: its eh-projection GEMM is priced (megatron-facts §5.3 MTP
extras), on the rank that holds the MTP layers (mechanisms-facts §7)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from planner.layouts import LayoutBatch
from planner.model.flops import flops_per_token
from planner.model.shapes import Gemm, layer_shapes
from planner.performance.compute import compute_time, gemm_fwd_time
from planner.performance.context import step_context
from planner.performance.step_time import default_profile
from planner.specs import ClusterSpec, Layout, TrainingJob
from tests.planner.fixtures import H100, MIXTRAL_8X7B

MTP_MOE = replace(MIXTRAL_8X7B, name="mixtral-mtp", mtp_num_layers=1)  # every layer MoE
CLUSTER = ClusterSpec(name="c", gpu=H100, num_gpus=64)
JOB = TrainingJob(seq_length=4096, global_batch_size=256)


def _ctx(layouts: list[Layout]):  # type: ignore[no-untyped-def]
    batch = LayoutBatch.from_layouts(layouts)
    return step_context(MTP_MOE, CLUSTER, JOB, batch, default_profile(H100))


def test_the_eh_projection_is_the_flop_formulas_mtp_gemm() -> None:
    h = float(MTP_MOE.hidden_size)
    (eh,) = layer_shapes(MTP_MOE).mtp_extra_gemms
    assert (eh.n, eh.k, eh.shard) == (h, 2 * h, "n")
    # the FLOP formula's MTP block: one more layer, one more output layer and the extras
    # 6 D (3h + 2h^2) (megatron-facts §5.3), whose GEMM part is the eh-projection (3 x fwd)
    v, s = 32768, 4096
    plain = replace(MTP_MOE, mtp_num_layers=0)
    block = flops_per_token(MTP_MOE, v, s) - flops_per_token(plain, v, s)
    layer = flops_per_token(replace(plain, num_layers=plain.num_layers + 1), v, s)
    extras = block - (layer - flops_per_token(plain, v, s)) - 6 * h * v
    np.testing.assert_allclose(extras, 6 * (3 * h + 2 * h * h), rtol=1e-12)
    assert 3 * eh.fwd_flop_per_token == 6 * 2 * h * h
    assert layer_shapes(MIXTRAL_8X7B).mtp_extra_gemms == ()


def test_the_mtp_layer_costs_its_layer_plus_the_eh_projection() -> None:
    ctx = _ctx([Layout(ep=8, dp=64), Layout(tp=2, ep=8, etp=1, dp=32)])
    c = compute_time(ctx)
    layer_fwd = c.stage_fwd / ctx.layers_per_stage  # every layer (and the MTP layer) is MoE
    h = float(MTP_MOE.hidden_size)
    eh = Gemm(fwd_flop_per_token=4 * h * h, n=h, k=2 * h, shard="n")
    expected = gemm_fwd_time(ctx, eh, ctx.tokens, ctx.tp)
    np.testing.assert_allclose(c.mtp_fwd - layer_fwd, expected, rtol=1e-9)
    assert (expected > 0).all()


def test_an_mtp_stage_on_another_rank_loads_that_rank() -> None:
    # 4 virtual stages on 2 ranks: stage 2 (rank 0) holds 16 layers, then the MTP layer or not
    elsewhere = Layout(pp=2, vpp=2, ep=8, dp=32, pipeline_layout="Et*8|t*8|t*16m|L")
    with_loss = Layout(pp=2, vpp=2, ep=8, dp=32, pipeline_layout="Et*8|t*8|t*16|mL")
    ctx = _ctx([elsewhere, with_loss])
    assert ctx.mtp_on_last.tolist() == [0.0, 1.0]
    assert ctx.mtp_rank_layers.tolist() == [24.0, 8.0]
    c = compute_time(ctx)
    # rank 0 runs 24 layers either way; with the MTP layer too it sets the pace
    np.testing.assert_allclose(c.compute_mb[1], 3 * c.stage_fwd[1], rtol=1e-12)
    np.testing.assert_allclose(c.compute_mb[0], 3 * (c.stage_fwd[0] + c.mtp_fwd[0]), rtol=1e-12)
