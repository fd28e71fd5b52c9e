"""The catalog: model architectures, GPUs, cluster presets and calibration profiles."""

from models_db.catalog import (
    CatalogError,
    ClusterPreset,
    cluster_spec,
    gpu_metadata,
    list_clusters,
    list_gpus,
    list_models,
    load_cluster_preset,
    load_gpu,
    load_model,
    model_metadata,
    resolve_model,
)

__all__ = [
    "CatalogError",
    "ClusterPreset",
    "cluster_spec",
    "gpu_metadata",
    "list_clusters",
    "list_gpus",
    "list_models",
    "load_cluster_preset",
    "load_gpu",
    "load_model",
    "model_metadata",
    "resolve_model",
]
