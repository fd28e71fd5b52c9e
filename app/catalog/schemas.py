"""Catalog schemas: models, GPUs and cluster presets, with versions."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.catalog.network import TOPOLOGY_HELP, NetworkFields
from app.core.bounds import check_spec_numbers
from app.core.schemas import SLUG_PATTERN, RequestModel, SlugRef
from planner.specs import IntraNodeTopology

Kind = Literal["model", "gpu", "cluster"]

LLAMA_70B_SPEC: dict[str, Any] = {
    "num_layers": 80,
    "hidden_size": 8192,
    "ffn_hidden_size": 28672,
    "num_attention_heads": 64,
    "num_query_groups": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
}


class ClusterPresetSpec(NetworkFields):
    """A cluster preset: which GPU, how many per node, and the network (per GPU, or as NICs per
    node x their rate, ``app.catalog.network``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # "NaN": a finite number

    gpu: SlugRef = Field(description="GPU slug (built-in or user-defined)")
    gpus_per_node: int = Field(default=8, ge=1, le=576)
    inter_node_bandwidth_bytes_per_s: float = Field(default=50e9, gt=0, le=1e13)
    inter_node_latency_s: float = Field(default=5e-6, ge=0, le=1.0)
    intra_node_latency_s: float = Field(default=2e-6, ge=0, le=1.0)
    intra_node_topology: IntraNodeTopology = Field(default="switch", description=TOPOLOGY_HELP)


class CatalogEntryCreate(RequestModel):
    """A new user-defined entry. ``spec`` holds the ModelSpec / GPUSpec / cluster fields."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"slug": "my-llama-70b", "spec": LLAMA_70B_SPEC}]},
    )

    slug: str = Field(pattern=SLUG_PATTERN)
    spec: dict[str, Any]  # its limits: the service checks them once text is read as numbers
    metadata: dict[str, Any] = Field(default_factory=dict)


class CatalogEntryUpdate(RequestModel):
    """A new version of an existing user-defined entry."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"spec": LLAMA_70B_SPEC}]}
    )

    spec: dict[str, Any]  # its limits: the service checks them once text is read as numbers
    metadata: dict[str, Any] = Field(default_factory=dict)


class HFImport(RequestModel):
    """A Hugging Face ``config.json`` to turn into a model entry."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "slug": "my-llama",
                    "config": {
                        "architectures": ["LlamaForCausalLM"],
                        "num_hidden_layers": 32,
                        "hidden_size": 4096,
                        "intermediate_size": 14336,
                        "num_attention_heads": 32,
                        "num_key_value_heads": 8,
                        "vocab_size": 128256,
                        "max_position_embeddings": 131072,
                    },
                }
            ]
        },
    )

    slug: str = Field(pattern=SLUG_PATTERN)
    config: dict[str, Any]

    @field_validator("config")
    @classmethod
    def _bounded_numbers(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_spec_numbers(value, "config")  # type: ignore[no-any-return]


class CatalogEntryRead(BaseModel):
    kind: Kind
    slug: str
    builtin: bool
    version: int
    spec: dict[str, Any]
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class CatalogList(BaseModel):
    items: list[CatalogEntryRead]
