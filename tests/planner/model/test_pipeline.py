"""Pipeline splits: even, embedding+loss counted as layers, uneven first/last stages."""

from __future__ import annotations

import pytest

from planner.megatron.args import parse_megatron_args
from planner.model.pipeline import pipeline_flags, split_layers


def test_even_split_has_no_flags() -> None:
    split = split_layers(80, 4, 5)
    assert split is not None and split.method == "even"
    assert split.chunks == (4,) * 20
    assert pipeline_flags(80, 4, 5) == []


def test_llama_405b_on_16_stages_counts_embedding_and_loss() -> None:
    # 126 decoder layers + embedding + loss = 128 = 16 x 8 (Llama-3.1-405B's published pp=16)
    split = split_layers(126, 16, 1)
    assert split is not None and split.method == "account"
    assert len(split.rank_layers(0)) == 7 and len(split.rank_layers(15)) == 7
    assert all(len(split.rank_layers(r)) == 8 for r in range(1, 15))
    assert pipeline_flags(126, 16, 1) == [
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split",
    ]


def test_deepseek_v3_61_layers_on_16_stages_is_uneven_and_valid() -> None:
    split = split_layers(61, 16, 1)
    assert split is not None and split.method == "uneven"
    first, last = split.first_stage_layers, split.last_stage_layers
    middle = (61 - first - last) / 14
    assert middle == int(middle) and max(first, last) <= middle  # rule 12; light ends
    assert sorted(i for r in range(16) for i in split.rank_layers(r)) == list(range(61))


@pytest.mark.parametrize(("layers", "pp", "vpp"), [(30, 32, 1), (30, 4, 7), (61, 1, 2)])
def test_impossible_splits_are_none(layers: int, pp: int, vpp: int) -> None:
    assert split_layers(layers, pp, vpp) is None


def test_interleaved_uneven_split_gives_each_chunk_whole_layers() -> None:
    split = split_layers(62, 8, 2)  # 62 % 16 != 0, 64 % 16 == 0 -> embedding+loss
    assert split is not None and split.method == "account"
    assert sum(split.chunks) == 62 and len(split.chunks) == 16


def test_flags_parse_back() -> None:
    flags = [
        "--num-layers",
        "61",
        "--pipeline-model-parallel-size",
        "16",
        *pipeline_flags(61, 16, 1),
    ]
    parsed = parse_megatron_args(flags, strict=False)
    assert parsed.layout.pp == 16


def test_uneven_split_keeps_the_last_rank_light() -> None:
    # the last rank also runs the output layer, the loss and MTP: of the equally balanced
    # splits of 61 layers over 8 ranks (worst rank 8 layers), the lightest last rank wins
    split = split_layers(61, 8, 1)
    assert split is not None and split.method == "uneven"
    assert (split.first_stage_layers, split.last_stage_layers) == (8, 5)
