"""The catalog's model form: a gpt-oss config.json is stored with its window, sinks and
activation, and the page shows them back with their help text."""

from __future__ import annotations

import html
import json

from fastapi.testclient import TestClient

from tests.app.web.test_web import client  # noqa: F401 (fixture)
from tests.models_db.test_hf_roundtrip import GPT_OSS_120B


def test_gpt_oss_config_round_trips_its_variant_fields(client: TestClient) -> None:  # noqa: F811
    data = {"name": "my-oss", "config_json": json.dumps(GPT_OSS_120B), "store": "1"}
    r = client.post("/catalog/models", data=data, follow_redirects=False)
    assert r.status_code == 303
    text = html.unescape(client.get(r.headers["location"]).text)
    for key, value in (("window_size", "[127, 0]"), ("window_attn_skip_freq", "2"),
                       ("softmax_type", '"learnable"'), ("quick_geglu", "true"),
                       ("swiglu", "false"), ("glu_linear_offset", "1.0"),
                       ("activation_func_clamp_value", "7.0")):  # fmt: skip
        assert f'<th scope="row">{key}</th><td><code>{value}</code>' in text, key
    assert "one learned attention sink per query head" in text
    spec = client.get("/v1/models/my-oss").json()["spec"]
    assert (spec["window_size"], spec["softmax_type"]) == ([127, 0], "learnable")


def test_parse_only_shows_a_mistral_window(client: TestClient) -> None:  # noqa: F811
    config = {"model_type": "mistral", "num_hidden_layers": 4, "hidden_size": 1024,
              "intermediate_size": 4096, "num_attention_heads": 16, "num_key_value_heads": 4,
              "vocab_size": 32000, "sliding_window": 4096}  # fmt: skip
    r = client.post("/catalog/models", data={"name": "m", "config_json": json.dumps(config)})
    text = html.unescape(r.text)
    assert r.status_code == 200
    assert '<th scope="row">window_size</th><td><code>[4095, 0]</code>' in text
    assert '<th scope="row">window_attn_skip_freq</th><td><code>null</code>' in text
