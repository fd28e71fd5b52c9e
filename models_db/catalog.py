"""Load the catalog: model architectures, GPUs and cluster presets, each number with its source.

Every entry is one JSON file under ``models_db/models``, ``models_db/gpus`` or
``models_db/clusters``, read through :mod:`importlib.resources` so that the catalog also works from
an installed wheel. Keys are the fields of the planner's dataclasses, plus a few catalog-only
metadata keys (display name, family, published parameter counts, CUDA-visible memory) that the
loader strips and serves through :func:`model_metadata` and :func:`gpu_metadata`.
"""

from __future__ import annotations

import copy
import difflib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from models_db.collectives import load_collective_table
from planner.calibration.measurements import default_network_bytes_per_s
from planner.model.hf_config import model_from_hf_config
from planner.specs import ClusterSpec, GPUSpec, IntraNodeTopology, ModelSpec, SpecError

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
    "network_bytes_per_s",
    "resolve_model",
]

MODEL_METADATA_KEYS = ("display_name", "family", "published_params")
GPU_METADATA_KEYS = ("display_name", "cuda_visible_bytes")


class CatalogError(SpecError, KeyError):
    """An unknown catalog slug (a :class:`SpecError` and a :class:`KeyError`)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return self.message


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterPreset:
    """A node type without a size: GPU slug, GPUs per node and the network between nodes."""

    name: str
    gpu: str
    """GPU catalog slug."""
    gpus_per_node: int
    inter_node_bandwidth_bytes_per_s: float
    """Scale-out bandwidth per GPU, one direction."""
    inter_node_latency_s: float
    intra_node_latency_s: float
    description: str = ""
    host_memory_bytes_per_gpu: float | None = None
    """Host DRAM per GPU (node DRAM / GPUs per node), for offloading."""
    nics_per_node: int | None = None
    nic_bandwidth_bytes_per_s: float | None = None
    """With ``nics_per_node``: the network per GPU is nics x rate / GPUs per node."""
    intra_node_topology: IntraNodeTopology = "switch"
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def spec(self, num_gpus: int, gpus_per_node: int | None = None) -> ClusterSpec:
        """A :class:`ClusterSpec` of ``num_gpus`` GPUs of this node type.

        Another ``gpus_per_node`` (64 of an NVL72 rack's 72) keeps the network per GPU: the
        preset's NIC count describes its own node size, not the one asked for."""
        own_nodes = gpus_per_node in (None, self.gpus_per_node)
        return ClusterSpec(
            name=self.name,
            gpu=load_gpu(self.gpu),
            num_gpus=num_gpus,
            gpus_per_node=gpus_per_node or self.gpus_per_node,
            inter_node_bandwidth_bytes_per_s=self.inter_node_bandwidth_bytes_per_s,
            inter_node_latency_s=self.inter_node_latency_s,
            intra_node_latency_s=self.intra_node_latency_s,
            host_memory_bytes_per_gpu=self.host_memory_bytes_per_gpu,
            nics_per_node=self.nics_per_node if own_nodes else None,
            nic_bandwidth_bytes_per_s=self.nic_bandwidth_bytes_per_s if own_nodes else None,
            intra_node_topology=self.intra_node_topology,
            sources=dict(self.sources),
        )


# --- raw files ---------------------------------------------------------------------------------


def _root() -> Traversable:
    """The package's data folder, also from a wheel or a zip (importlib.resources)."""
    try:
        return resources.files("models_db")
    except (NotADirectoryError, TypeError):
        # An editable install that registered models_db as a namespace package gives a
        # MultiplexedPath over a placeholder entry; the folder of this file is the same data.
        return Path(__file__).resolve().parent


@cache
def _slugs(kind: str) -> tuple[str, ...]:
    folder = _root().joinpath(kind)
    return tuple(
        sorted(entry.name[:-5] for entry in folder.iterdir() if entry.name.endswith(".json"))
    )


@cache
def _raw(kind: str, slug: str) -> dict[str, Any]:
    """The parsed JSON file of one entry (cached; callers must copy before changing it)."""
    if slug not in _slugs(kind):
        singular = kind.rstrip("s")
        close = difflib.get_close_matches(slug, _slugs(kind), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise CatalogError(
            f"unknown {singular} {slug!r}; {hint}known {kind}: {', '.join(_slugs(kind))}",
            field=singular,
        )
    text = _root().joinpath(kind).joinpath(f"{slug}.json").read_text("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("name") != slug:
        raise SpecError(f"catalog file {kind}/{slug}.json must be an object with name {slug!r}")
    return data


def _split(data: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    spec = {k: copy.deepcopy(v) for k, v in data.items() if k not in keys}
    meta = {k: copy.deepcopy(v) for k, v in data.items() if k in keys}
    return spec, meta


# --- models ------------------------------------------------------------------------------------


def list_models() -> list[str]:
    """Slugs of the catalog's model architectures, sorted."""
    return list(_slugs("models"))


@cache
def load_model(slug: str) -> ModelSpec:
    """The catalog's :class:`ModelSpec` for ``slug``; :class:`CatalogError` if unknown."""
    spec, _ = _split(_raw("models", slug), MODEL_METADATA_KEYS)
    return ModelSpec.from_dict(spec)


def model_metadata(slug: str) -> dict[str, Any]:
    """Catalog-only facts of a model: display_name, family, published_params (a fresh copy)."""
    _, meta = _split(_raw("models", slug), MODEL_METADATA_KEYS)
    return meta


# --- GPUs and clusters -------------------------------------------------------------------------


def list_gpus() -> list[str]:
    return list(_slugs("gpus"))


@cache
def load_gpu(slug: str) -> GPUSpec:
    spec, _ = _split(_raw("gpus", slug), GPU_METADATA_KEYS)
    # the bandwidth-vs-size curves of models_db/collectives travel with the GPU (issue 12 item 3)
    return replace(GPUSpec.from_dict(spec), collectives=load_collective_table(slug))


def gpu_metadata(slug: str) -> dict[str, Any]:
    """Catalog-only facts of a GPU: display_name, cuda_visible_bytes (None where unknown)."""
    _, meta = _split(_raw("gpus", slug), GPU_METADATA_KEYS)
    return meta


def list_clusters() -> list[str]:
    return list(_slugs("clusters"))


@cache
def load_cluster_preset(slug: str) -> ClusterPreset:
    data = copy.deepcopy(_raw("clusters", slug))
    try:
        preset = ClusterPreset(**data)
    except TypeError as exc:
        raise SpecError(f"catalog file clusters/{slug}.json: {exc}") from exc
    load_gpu(preset.gpu)  # fail here, not later, on a preset naming an unknown GPU
    return preset


def _preset_for(slug: str) -> ClusterPreset:
    if slug in _slugs("clusters"):
        return load_cluster_preset(slug)
    if slug in _slugs("gpus"):
        for name in _slugs("clusters"):
            preset = load_cluster_preset(name)
            if preset.gpu == slug:
                return preset
        raise CatalogError(
            f"no cluster preset uses GPU {slug!r}; add one to models_db/clusters", field="cluster"
        )
    choices = _slugs("clusters") + _slugs("gpus")
    close = difflib.get_close_matches(slug, choices, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    raise CatalogError(
        f"unknown cluster preset or GPU {slug!r}; {hint}known presets: "
        f"{', '.join(_slugs('clusters'))}; known GPUs: {', '.join(_slugs('gpus'))}",
        field="cluster",
    )


def network_bytes_per_s(gpu: GPUSpec) -> float:
    """Scale-out bandwidth per GPU of the catalog preset built on ``gpu`` (for measurement rows
    that name only a GPU type); the planner's generation default for a GPU with no preset."""
    try:
        return _preset_for(gpu.name).inter_node_bandwidth_bytes_per_s
    except CatalogError:
        return default_network_bytes_per_s(gpu)


def cluster_spec(
    preset_or_gpu: str, num_gpus: int, gpus_per_node: int | None = None
) -> ClusterSpec:
    """A cluster of ``num_gpus`` GPUs from a preset slug, or from a GPU slug.

    A GPU slug takes the network defaults of the preset built on that GPU (h100-sxm-80gb ->
    dgx-h100, mi300x-192gb -> mi300x-8x).
    """
    return _preset_for(preset_or_gpu).spec(num_gpus, gpus_per_node)


# --- resolving user input ----------------------------------------------------------------------


def _looks_like_hf(data: Mapping[str, Any]) -> bool:
    return "architectures" in data or "model_type" in data


def _hf_name(data: Mapping[str, Any]) -> str | None:
    """The name a Hugging Face config gives itself: ``_name_or_path``, else its architecture."""
    named = str(data.get("_name_or_path") or "").strip().rstrip("/")
    if named:  # a hub id ("meta-llama/Llama-3.1-8B") as is; a local path by its last part
        return named.rsplit("/", 1)[-1] if named.startswith(("/", ".", "~")) else named
    architectures = data.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def _model_from_mapping(data: Mapping[str, Any], default_name: str | None) -> ModelSpec:
    if _looks_like_hf(data):
        # the config's own name first: a checkout's folder is often just "hf" or a hash
        name = data.get("name") or _hf_name(data) or default_name
        return model_from_hf_config(data, name=name)
    spec, _ = _split(data, MODEL_METADATA_KEYS)
    if not spec.get("name") and default_name:
        spec["name"] = default_name
    return ModelSpec.from_dict(spec)


def _read_file(path: Path) -> Any:
    text = path.read_text("utf-8")
    # numbers in plain decimal only: YAML 1.1 read 'hidden_size: 8_192' as 8192 (plain_yaml.py)
    from models_db.plain_yaml import NumberFormError, load_json, load_yaml

    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml  # only needed for YAML specs

            try:
                return load_yaml(text)
            except yaml.YAMLError as exc:
                raise SpecError(f"{path} is not valid YAML: {exc}") from None
        return load_json(text)
    except NumberFormError as exc:
        raise SpecError(f"{path}: {exc}", field=exc.key) from None
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path} is not valid JSON: {exc}") from exc


def resolve_model(ref: str | Path | Mapping[str, Any] | ModelSpec) -> ModelSpec:
    """A :class:`ModelSpec` from whatever a user gave.

    ``ref`` may be a catalog slug, a path to a JSON/YAML ModelSpec file, a path to a Hugging Face
    ``config.json``, an inline dict (ModelSpec fields, or an HF config recognised by its
    ``architectures``/``model_type`` keys), or a ModelSpec.
    """
    if isinstance(ref, ModelSpec):
        return ref
    if isinstance(ref, Mapping):
        return _model_from_mapping(ref, None)
    if isinstance(ref, str) and ref in _slugs("models"):
        return load_model(ref)
    path = Path(ref)
    if path.is_file():
        data = _read_file(path)
        if not isinstance(data, Mapping):
            raise SpecError(f"{path} must hold an object of model fields")
        # A spec file without a name is named by its file (config.json: by its folder, unless
        # the config names itself; see _hf_name).
        default = path.parent.name if path.stem == "config" and path.parent.name else path.stem
        return _model_from_mapping(data, default)
    try:
        return load_model(str(ref))
    except CatalogError as exc:
        raise CatalogError(
            f"{exc.message} ({ref!r} is not an existing file either)", field="model"
        ) from None
