"""Megatron's pipeline layout strings: grammar, validation and placement."""

from __future__ import annotations

import pytest

from planner.model.pipeline_layout import parse_pipeline_layout
from planner.specs import Layout, SpecError


def test_nvidia_deepseek_v3_layouts_parse_to_32_and_16_stages() -> None:
    h100 = parse_pipeline_layout("Et|(tt|)*30mL")
    assert h100.num_stages == 32 and h100.count("t") == 61 and h100.count("m") == 1
    assert h100.stages[0] == "Et" and h100.stages[-1] == "mL"
    h100.validate(pp=8, vpp=4, num_layers=61, mtp_num_layers=1)
    vpp2 = parse_pipeline_layout("Et*4|(tttt|)*14tmL")
    assert vpp2.num_stages == 16 and vpp2.count("t") == 61
    vpp2.validate(pp=8, vpp=2, num_layers=61, mtp_num_layers=1)


def test_commas_and_spaces_are_ignored_and_groups_nest() -> None:
    assert parse_pipeline_layout("E|(t|)*3,m|L").stages == ("E", "t", "t", "t", "m", "L")
    assert parse_pipeline_layout("E, ((t|)*2)*2 L").stages == ("Et", "t", "t", "t", "L")


def test_placement_follows_megatrons_virtual_stage_order() -> None:
    layout = parse_pipeline_layout("Et|(tt|)*30mL")
    # virtual stage k runs on rank k mod 8: rank 0 holds stages 0, 8, 16, 24
    assert layout.rank_layers(8, 0) == [0, 15, 16, 31, 32, 47, 48]
    assert layout.max_rank_layers(8) == 8
    assert len(layout.rank_layers(8, 7)) == 6  # the last stage holds only m and L


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Et|(tt|)*30L", "MTP layers"),
        ("Et|(tt|)*28ttt|tmL", "stages"),
        ("t|(tt|)*30mEL", "embedding"),
        ("Et|(tt|)*30Lm", "loss"),
        ("Et|(tt|)*30tL", "decoder layers"),
    ],
)
def test_invalid_layouts_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        parse_pipeline_layout(text).validate(pp=8, vpp=4, num_layers=61, mtp_num_layers=1)


def test_a_layout_without_mtp_says_how_to_describe_a_run_without_mtp() -> None:
    # MLM-DSV3's GB200 run writes no 'm' (mechanisms-facts §7): the model is the thing to change
    with pytest.raises(SpecError, match=r"without MTP, give the model with mtp_num_layers=0"):
        parse_pipeline_layout("Et|(tt|)*30L").validate(pp=8, vpp=4, num_layers=61, mtp_num_layers=1)
    parse_pipeline_layout("Et|(tt|)*30L").validate(pp=8, vpp=4, num_layers=61, mtp_num_layers=0)


@pytest.mark.parametrize("text", ["Ex|L", "E((t|)*3", "(t*99999|)*99999", "E*|L", ""])
def test_malformed_strings_are_rejected(text: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_pipeline_layout(text)
    assert info.value.field == "pipeline_layout"


def test_the_rules_check_the_stage_count_and_the_grammar() -> None:
    from models_db.catalog import cluster_spec, load_model
    from planner.space.rules import violations
    from planner.specs import TrainingJob

    model, cluster = load_model("deepseek-v3"), cluster_spec("dgx-h100", 1024)
    job = TrainingJob(seq_length=4096, global_batch_size=8192, precision="fp8")
    base = dict(tp=2, pp=8, ep=64, etp=1, dp=64)
    (stages,) = violations(
        model, cluster, job, Layout(**base, vpp=2, pipeline_layout="Et|(tt|)*30mL")
    )
    assert "set vpp=4" in stages
    (grammar,) = violations(model, cluster, job, Layout(**base, vpp=4, pipeline_layout="Et|q|L"))
    assert "'q'" in grammar


def test_the_balanced_layout_of_deepseek_v3_on_8x4_is_nvidias() -> None:
    from planner.model.pipeline_layout import balanced_layout

    assert balanced_layout(61, 1, 8, 4) == "Et|(tt|)*30mL"  # mechanisms-facts §7 (H100)
    for pp, vpp in ((8, 2), (4, 4), (4, 2), (16, 1)):
        text = balanced_layout(61, 1, pp, vpp)
        assert text is not None
        layout = parse_pipeline_layout(text)
        layout.validate(pp=pp, vpp=vpp, num_layers=61, mtp_num_layers=1)
        per_stage = [
            s.count("t") + s.count("E") + s.count("m") + s.count("L") for s in layout.stages
        ]
        assert max(per_stage) - min(per_stage) <= 1  # balanced in layer-equivalents
    assert balanced_layout(61, 1, 8, 5) is None  # 64 units on 40 stages leave no room for m, L


@pytest.mark.parametrize(
    ("text", "words"),
    [("0", "not a repetition count"), ("123", "not a repetition count"),
     ("Et3|tL", "not a repetition count"), ("tt|tL", "exactly one embedding 'E'"),
     ("Et|EtL", "exactly one embedding 'E'"), ("Et|tt", "exactly one loss 'L'"),
     ("EL", "no decoder layer")],
)  # fmt: skip
def test_a_layout_no_model_accepts_is_refused_by_its_grammar(text: str, words: str) -> None:
    with pytest.raises(SpecError, match=words) as err:
        parse_pipeline_layout(text).validate_grammar()
    assert err.value.field == "pipeline_layout"


def test_a_well_formed_layout_passes_the_grammar() -> None:
    parse_pipeline_layout("Et|(tt|)*30mL").validate_grammar()
