"""Memory settings in the search space: fixed inputs, searched axes, numerics opt-in."""

from __future__ import annotations

import pytest

from models_db.catalog import cluster_spec, load_model
from planner.space.enumeration import SearchConstraints, enumerate_layouts
from planner.space.memory_axes import MemoryChoices
from planner.specs import SpecError, TrainingJob

MODEL = load_model("llama3.1-8b")
CLUSTER = cluster_spec("dgx-h100", 8)
JOB = TrainingJob(seq_length=4096, global_batch_size=64)


def layouts(**kw: object) -> list:  # type: ignore[type-arg]
    batch = enumerate_layouts(MODEL, CLUSTER, JOB, SearchConstraints(memory=MemoryChoices(**kw)))
    return batch.layouts()


def test_numerics_changing_settings_are_searched_only_when_allowed() -> None:
    plain = layouts()
    assert {(x.grad_reduce_dtype, x.optimizer_state_dtype) for x in plain} == {("fp32", "fp32")}
    allowed = layouts(allow_numerics_changes=True)
    assert len(allowed) == 4 * len(plain)
    assert ("bf16", "bf16") in {(x.grad_reduce_dtype, x.optimizer_state_dtype) for x in allowed}


def test_fixed_settings_reach_every_candidate_where_they_apply() -> None:
    found = layouts(recompute_modules=("core_attn", "mlp"), recompute_num_layers=4,
                    optimizer_offload_fraction=(0.0, 0.5))  # fmt: skip
    assert {x.optimizer_offload_fraction for x in found} == {0.0, 0.5}
    for x in found:
        if x.recompute == "selective":
            assert x.recompute_modules == ("core_attn", "mlp")
        else:
            assert x.recompute_modules is None
        assert x.recompute_num_layers == (4 if x.recompute == "full" else None)


def test_recommended_module_sets_are_tried_for_selective_candidates() -> None:
    base = layouts()
    searched = layouts(search_recompute_modules=True)
    selective = sum(x.recompute == "selective" for x in base)
    assert len(searched) == len(base) + selective  # dense: the default and core_attn + mlp
    assert {x.recompute_modules for x in searched} == {None, ("core_attn", "mlp")}


def test_a_fixed_pipeline_layout_fixes_vpp() -> None:
    found = layouts(pipeline_layout="Etttt|(tttt|)*6ttttL")
    assert found and {(x.pp, x.vpp) for x in found} <= {(1, 8), (2, 4), (4, 2), (8, 1)}
    assert all(x.pipeline_layout == "Etttt|(tttt|)*6ttttL" for x in found)


def test_bad_choices_name_the_field() -> None:
    with pytest.raises(SpecError) as info:
        MemoryChoices(optimizer_offload_fraction=(1.5,))
    assert info.value.field == "optimizer_offload_fraction"
    with pytest.raises(SpecError, match="grad_reduce_dtype"):
        MemoryChoices(grad_reduce_dtype=("fp64",))  # type: ignore[arg-type]


def test_deepseek_v3_candidates_interleave_with_balanced_layouts() -> None:
    from planner.space.rules import check_rules

    model = load_model("deepseek-v3")
    cluster = cluster_spec("dgx-h100", 1024)
    job = TrainingJob(seq_length=4096, global_batch_size=8192, precision="fp8")
    fixed = SearchConstraints(tp=2, pp=8, ep=64, etp=1, micro_batch_size=1,
                              memory=MemoryChoices(auto_pipeline_layout=True))  # fmt: skip
    batch = enumerate_layouts(model, cluster, job, fixed)
    valid = ~check_rules(model, cluster, job, batch).any(axis=1)
    interleaved = {
        str(batch.mem.pipeline_layout[i])
        for i in range(len(batch))
        if valid[i] and batch.vpp[i] == 4
    }
    assert interleaved == {"Et|(tt|)*30mL"}
    off = SearchConstraints(tp=2, pp=8, ep=64, etp=1, micro_batch_size=1)  # the default
    assert set(enumerate_layouts(model, cluster, job, off).vpp.tolist()) == {1}
