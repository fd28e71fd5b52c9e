"""An inline model or GPU in a plan request (``"model": {...}``, ``"gpu": {...}``) reads its
numbers by the request's own rule, as a catalog spec does (app/catalog/spec_numbers.py): "4" is
4, and '1_6', true or a 400-digit number is a 422 naming ``model.FIELD`` / ``gpu.FIELD``.
Before, the planner's "num_layers='4' must be an integer" came back, an inline GPU took true
as 1 byte of HBM, text gave "'<=' not supported between instances of 'str' and 'int'", and
``hbm_bytes: 10**400`` was a 500."""

from __future__ import annotations

from typing import Any

import pytest

from app.planning.convert import RequestError, resolve_gpu, resolve_model
from app.planning.schemas import EvaluationRequest

MODEL = {"name": "tiny", "num_layers": 4, "hidden_size": 512, "ffn_hidden_size": 2048,
         "num_attention_heads": 8, "vocab_size": 32000}  # fmt: skip
GPU = {"name": "g", "hbm_bytes": 80e9, "hbm_bandwidth_bytes_per_s": 3e12,
       "peak_bf16_flop_per_s": 9e14, "peak_fp8_flop_per_s": None,
       "intra_node_bandwidth_bytes_per_s": 4.5e11}  # fmt: skip


def _gpu_request(gpu: dict[str, Any]) -> EvaluationRequest:
    job = {"num_gpus": 8, "seq_length": 4096, "global_batch_size": 64}
    return EvaluationRequest.model_validate({"model": "llama3.1-8b", "gpu": gpu, **job})


def test_inline_model_number_text_is_the_number() -> None:
    assert resolve_model({**MODEL, "num_layers": "4", "hidden_dropout": "0.1"}).num_layers == 4


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("1_6", "model.num_layers: got the text '1_6': a number is expected"),
        (True, "model.num_layers: got true: true/false is not a number"),
        ("5000", "model.num_layers=5000 is above the limit of 2048"),
    ],
)
def test_a_bad_inline_model_number_names_its_field(value: Any, says: str) -> None:
    with pytest.raises(RequestError) as caught:
        resolve_model({**MODEL, "num_layers": value})
    assert caught.value.errors[0]["field"] == "model.num_layers"
    assert caught.value.message.startswith(says)


def test_a_hugging_face_config_is_left_to_its_reader() -> None:
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256,
              "intermediate_size": 512, "num_attention_heads": 4, "vocab_size": 1000}  # fmt: skip
    assert resolve_model(config).num_layers == 2


def test_inline_gpu_number_text_is_the_number() -> None:
    gpu = resolve_gpu(_gpu_request({**GPU, "hbm_bytes": "80000000000"}))
    assert gpu.hbm_bytes == 80_000_000_000 and isinstance(gpu.hbm_bytes, int)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (True, "gpu.hbm_bytes: got true: true/false is not a number; send a whole number"),
        ("80 GB", "gpu.hbm_bytes: got the text '80 GB': a number is expected"),
        (10**400, "gpu.hbm_bytes is above the limit of 17592186044416 (got a huge number)"),
    ],
)
def test_a_bad_inline_gpu_number_names_its_field(value: Any, says: str) -> None:
    request = _gpu_request({**GPU, "hbm_bytes": value})
    with pytest.raises(RequestError) as caught:
        resolve_gpu(request)
    assert caught.value.errors[0]["field"] == "gpu.hbm_bytes"
    assert caught.value.message.startswith(says)
