"""Domain types: the model, the hardware, the training job and one parallel layout.

Every type is a frozen, keyword-only dataclass with SI units in its field names. Cross-field
checks raise :class:`SpecError` with a message that names the bad values and says how to fix
them. Model fields use Megatron-LM's flag names with underscores (``--num-query-groups`` is
``num_query_groups``), so that a user who knows Megatron knows these types.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from planner.layout_types import MemorySettings

if TYPE_CHECKING:  # the catalog attaches it; specs never import the performance package
    from planner.performance.collective_bandwidth import CollectiveTable

Normalization = Literal["LayerNorm", "RMSNorm"]
PositionEmbedding = Literal["rope", "yarn", "learned_absolute", "none"]
Precision = Literal["bf16", "fp8", "fp16"]
IntraNodeTopology = Literal["switch", "mesh"]
INTRA_NODE_TOPOLOGIES: tuple[IntraNodeTopology, ...] = ("switch", "mesh")
Recompute = Literal["none", "selective", "full"]
OptimizerSharding = Literal["none", "optimizer", "full"]
MoeDispatcher = Literal["alltoall", "flex"]
SoftmaxType = Literal["vanilla", "off-by-one", "learnable"]  # --softmax-type, catalog-facts §1.6
SOFTMAX_TYPES: tuple[SoftmaxType, ...] = ("vanilla", "off-by-one", "learnable")
_T = TypeVar("_T")

RECOMPUTE_CHOICES: tuple[Recompute, ...] = ("none", "selective", "full")
OPTIMIZER_SHARDING_CHOICES: tuple[OptimizerSharding, ...] = ("none", "optimizer", "full")
PRECISION_CHOICES: tuple[Precision, ...] = ("bf16", "fp8", "fp16")
BLACKWELL_OR_NEWER = frozenset({"blackwell", "rubin"})
"""GPU architectures of Blackwell's generation or later (Rubin succeeds Blackwell)."""
MOE_DISPATCHER_CHOICES: tuple[MoeDispatcher, ...] = ("alltoall", "flex")
CpCommType = Literal["p2p", "all_gather", "a2a", "a2a+p2p"]
CP_COMM_TYPES: tuple[CpCommType, ...] = ("p2p", "all_gather", "a2a", "a2a+p2p")
"""``--cp-comm-type`` values in Transformer Engine's spellings (megatron-facts: passed verbatim
to TE; the help text's 'allgather' is not accepted)."""


class SpecError(ValueError):
    """An input that cannot describe a real model, cluster, job or layout.

    ``field`` names the offending field (dotted for nested input) so that an API can point at it.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def _positive(obj: object, *names: str) -> None:
    for name in names:
        value = getattr(obj, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{name}={value!r} must be an integer", field=name)
        if value <= 0:
            raise SpecError(f"{name}={value} must be a positive integer", field=name)


def _positive_or_none(obj: object, name: str) -> None:
    if (value := getattr(obj, name)) is not None and not value > 0:
        raise SpecError(f"{name} must be positive or null", field=name)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer in Megatron-LM flag terms."""

    name: str
    """Catalog slug or a user's name for the model."""
    num_layers: int
    """Decoder layers (``--num-layers``), MTP layers not included."""
    hidden_size: int
    """``--hidden-size``."""
    ffn_hidden_size: int
    """Dense MLP intermediate size (``--ffn-hidden-size``)."""
    num_attention_heads: int
    """Query heads (``--num-attention-heads``)."""
    vocab_size: int
    """Tokenizer vocabulary before Megatron's padding (megatron-facts §3.4)."""
    num_query_groups: int | None = None
    """KV heads for GQA (``--num-query-groups``); None means multi-head attention."""
    kv_channels: int | None = None
    """Head dimension (``--kv-channels``); None means hidden_size / num_attention_heads."""
    max_position_embeddings: int | None = None
    """``--max-position-embeddings``; None means 'as long as the job's sequence'."""
    swiglu: bool = True
    """Gated SiLU MLP (``--swiglu``); False with no other activation set means GeLU."""
    quick_geglu: bool = False
    """Gated quick-GELU MLP (``--quick-geglu``), 3 matrices as SwiGLU (GPT-OSS, facts §1.3)."""
    squared_relu: bool = False
    """Squared-ReLU MLP (``--squared-relu``), not gated (Nemotron-4, catalog-facts pitfall 14)."""
    glu_linear_offset: float = 0.0
    """act(gate) x (linear + offset) of a gated MLP (``--glu-linear-offset``; GPT-OSS 1.0)."""
    activation_func_clamp_value: float | None = None
    """Quick-GeGLU input clamp (``--activation-func-clamp-value``; GPT-OSS 7.0); None: none."""
    normalization: Normalization = "RMSNorm"
    position_embedding_type: PositionEmbedding = "rope"
    untie_embeddings_and_output_weights: bool = True
    add_bias_linear: bool = False
    """Biases on every linear layer (Megatron's default is True; Llama-style models have none)."""
    add_qkv_bias: bool = False
    """Bias on the QKV projection only (Qwen2)."""
    qk_layernorm: bool = False
    """RMSNorm on Q and K per head (Qwen3, OLMo2)."""
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    # --- sliding-window attention and attention sinks (catalog-facts §1.6) -------------------
    window_size: tuple[int, int] | None = None
    """Sliding window (``--window-size L,R``): a query sees itself and L previous tokens
    (GPT-OSS: (127, 0), catalog-facts pitfall 11). None: full attention in every layer."""
    window_attn_skip_freq: int | None = None
    """N-1 windowed layers, then one full (``--window-attn-skip-freq N``; GPT-OSS 2); None: all."""
    softmax_type: SoftmaxType = "vanilla"
    """``--softmax-type``: 'learnable' = one learned sink per query head (GPT-OSS)."""
    # --- mixture of experts -------------------------------------------------------------------
    num_experts: int | None = None
    """Routed experts (``--num-experts``); None for a dense model."""
    moe_router_topk: int = 2
    moe_ffn_hidden_size: int | None = None
    """Routed-expert intermediate size; None means ffn_hidden_size."""
    moe_shared_expert_intermediate_size: int | None = None
    """Total shared-expert intermediate size (number of shared experts x size of each)."""
    moe_layer_freq: int = 1
    """Every moe_layer_freq-th layer is MoE, counting from layer 0 (Megatron's int form)."""
    moe_first_dense_layers: int = 0
    """Leading dense layers before the MoE layers (DeepSeek-V3: 3). Emitted as a list pattern."""
    # --- multi-head latent attention (DeepSeek) -----------------------------------------------
    multi_latent_attention: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_head_dim: int | None = None
    qk_pos_emb_head_dim: int | None = None
    v_head_dim: int | None = None
    # --- rotary position embedding (megatron-facts §1.4, §1.11) -----------------------------
    rotary_base: float | None = None
    """RoPE theta (``--rotary-base``); None means Megatron's default 10000 (no flag emitted)."""
    rotary_percent: float = 1.0
    """Share of each head dimension that is rotated (``--rotary-percent``, in (0, 1]);
    Nemotron-4: 0.5. Hugging Face calls it ``partial_rotary_factor``."""
    use_rope_scaling: bool = False
    """Llama-3.1-style frequency scaling (``--use-rope-scaling``; low/high frequency factors 1 and
    4 and original length 8192 are fixed in Megatron). Hugging Face rope_type 'llama3'."""
    rope_scaling_factor: float = 8.0
    """Factor of the Llama-3 scaling (``--rope-scaling-factor``, Megatron's default 8.0; Llama 3.2
    1B/3B use 32). Only read when use_rope_scaling is true."""
    rotary_scaling_factor: float | None = None
    """YaRN context-extension factor (``--rotary-scaling-factor``; DeepSeek-V3 40, GPT-OSS 32);
    None means no YaRN scaling. MLA or position_embedding_type 'yarn' only."""
    mscale: float | None = None
    """YaRN attention-scale coefficient (``--mscale``); None means Megatron's default 1.0."""
    mscale_all_dim: float | None = None
    """YaRN ``--mscale-all-dim``; None means Megatron's default 0.0."""
    # --- multi-token prediction ---------------------------------------------------------------
    mtp_num_layers: int = 0
    """Depth D of multi-token prediction (``--mtp-num-layers``)."""
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    """Where each number comes from: field name (or 'all') -> citation."""

    def __post_init__(self) -> None:
        from planner.model_checks import check_model  # it imports this module

        check_model(self)

    # --- derived shape ------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.num_experts is not None and self.num_experts > 1

    @property
    def query_groups(self) -> int:
        """KV heads g (= heads for MHA)."""
        return self.num_query_groups or self.num_attention_heads

    @property
    def head_dim(self) -> int:
        if self.kv_channels is not None:
            return self.kv_channels
        return self.hidden_size // self.num_attention_heads

    @property
    def gated_linear_unit(self) -> bool:
        """A gated MLP (SwiGLU or quick-GeGLU): FC1 is 2F wide, three matrices (§5.3 phi = 3)."""
        return self.swiglu or self.quick_geglu

    @property
    def expert_ffn_hidden_size(self) -> int:
        return self.moe_ffn_hidden_size or self.ffn_hidden_size

    @property
    def shared_expert_ffn_hidden_size(self) -> int:
        return self.moe_shared_expert_intermediate_size or 0

    def moe_layer_pattern(self) -> list[bool]:
        """True for each decoder layer that is MoE (megatron-facts §1.5 moe_layer_freq)."""
        if not self.is_moe:
            return [False] * self.num_layers
        return [
            i >= self.moe_first_dense_layers and i % self.moe_layer_freq == 0
            for i in range(self.num_layers)
        ]

    @property
    def num_moe_layers(self) -> int:
        return sum(self.moe_layer_pattern())

    @property
    def num_dense_layers(self) -> int:
        return self.num_layers - self.num_moe_layers

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        return _from_dict(cls, data)


@dataclass(frozen=True, slots=True, kw_only=True)
class GPUSpec:
    """One accelerator type. Numbers come from ``models_db/gpus`` with their sources."""

    name: str
    """Catalog slug, e.g. ``h100-sxm-80gb``."""
    hbm_bytes: int
    """Usable device memory as the driver reports it."""
    hbm_bandwidth_bytes_per_s: float
    """Peak HBM bandwidth."""
    peak_bf16_flop_per_s: float
    """Dense (not 2:4 sparse) bf16 tensor-core peak."""
    peak_fp8_flop_per_s: float | None
    """Dense fp8 peak; None where the GPU has no fp8 tensor cores (A100)."""
    intra_node_bandwidth_bytes_per_s: float
    """Scale-up link bandwidth per GPU, one direction (NVLink / Infinity Fabric)."""
    bf16_supported: bool = True
    """False for GPUs without bf16 tensor cores (V100): their jobs train in fp16 with loss
    scaling, and ``peak_bf16_flop_per_s`` then holds the fp16 peak."""
    host_link_bandwidth_bytes_per_s: float | None = None
    """GPU-to-host link per direction (PCIe Gen4/Gen5 x16, NVLink-C2C): prices CPU offload.
    None means unknown; offloading then cannot be planned."""
    vendor: str = "nvidia"
    architecture: str = "hopper"
    """ampere | hopper | blackwell | cdna3: decides kernels and env vars."""
    sm_count: int | None = None
    """Streaming multiprocessors (compute units on AMD); sets the wave efficiency of kernels
    with few thread blocks (performance-facts §2.5). None where unknown."""
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    collectives: CollectiveTable | None = field(default=None, compare=False, hash=False, repr=False)
    """Collective bandwidth versus message size of this GPU type (``models_db/collectives``,
    attached by the catalog; mechanisms-facts §2). None: the throughput model prices collectives
    with the profile's constant link efficiencies. Not part of ``to_dict``."""

    def __post_init__(self) -> None:
        if self.hbm_bytes <= 0:
            raise SpecError("hbm_bytes must be positive", field="hbm_bytes")
        _positive(self, "sm_count")
        for name in (
            "hbm_bandwidth_bytes_per_s",
            "peak_bf16_flop_per_s",
            "intra_node_bandwidth_bytes_per_s",
        ):
            if not getattr(self, name) > 0:
                raise SpecError(f"{name} must be positive", field=name)
        _positive_or_none(self, "host_link_bandwidth_bytes_per_s")
        _positive_or_none(self, "peak_fp8_flop_per_s")

    def peak_flop_per_s(self, precision: Precision) -> float:
        if precision == "fp8" and self.peak_fp8_flop_per_s is not None:
            return self.peak_fp8_flop_per_s
        return self.peak_bf16_flop_per_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(replace(self, collectives=None))
        del data["collectives"]  # catalog data, not part of a GPU description
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GPUSpec:
        if isinstance(data, dict) and "collectives" in data:
            raise SpecError(
                "collectives is catalog data (models_db/collectives), not a GPU field; remove it",
                field="collectives",
            )
        return _from_dict(cls, data)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterSpec:
    """A set of identical nodes: GPUs inside a node share the scale-up link, nodes a network."""

    name: str
    gpu: GPUSpec
    num_gpus: int
    """GPUs the job may use."""
    gpus_per_node: int = 8
    inter_node_bandwidth_bytes_per_s: float = 50e9
    """Network bandwidth per GPU, one direction (8 x 400 Gb/s NICs per 8 GPUs = 50 GB/s)."""
    inter_node_latency_s: float = 5e-6
    intra_node_latency_s: float = 2e-6
    host_memory_bytes_per_gpu: float | None = None
    """Host DRAM available to each GPU's process for offloaded optimizer state and activations
    (node DRAM / GPUs per node); None means unknown, and offloading cannot be planned."""
    nics_per_node: int | None = None
    """Network adapters per node (issue 12 item 2). With ``nic_bandwidth_bytes_per_s`` it defines
    the network bandwidth per GPU (nics x rate / gpus_per_node, which then replaces
    ``inter_node_bandwidth_bytes_per_s``). None: one NIC per GPU at the per-GPU bandwidth."""
    nic_bandwidth_bytes_per_s: float | None = None
    """One NIC's rate, one direction (400 Gb/s NDR = 50e9; NCCL reaches 46-49 GB/s of it,
    performance-facts §4.2)."""
    intra_node_topology: IntraNodeTopology = "switch"
    """'switch': NVSwitch, every GPU pair at the GPU's full scale-up bandwidth; 'mesh': direct
    links (AMD xGMI, V100 NVLink boards), a GPU's scale-up bandwidth split over its gpus_per_node-1
    peers, so a pair (send/recv, one ring step) gets 1/(g-1) of it."""
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        _positive(self, "num_gpus", "gpus_per_node")
        _check_network(self)
        if self.num_gpus > self.gpus_per_node and self.num_gpus % self.gpus_per_node:
            raise SpecError(
                f"num_gpus={self.num_gpus} is not a whole number of nodes of "
                f"gpus_per_node={self.gpus_per_node}; use a multiple of {self.gpus_per_node}",
                field="num_gpus",
            )
        _positive_or_none(self, "host_memory_bytes_per_gpu")
        if not self.inter_node_bandwidth_bytes_per_s > 0:
            raise SpecError(
                "inter_node_bandwidth_bytes_per_s must be positive",
                field="inter_node_bandwidth_bytes_per_s",
            )

    @property
    def num_nodes(self) -> int:
        return max(1, math.ceil(self.num_gpus / self.gpus_per_node))

    @property
    def nics_per_gpu(self) -> float:
        """NICs per GPU (1.0 when the NIC count is not given)."""
        return 1.0 if self.nics_per_node is None else self.nics_per_node / self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        data = asdict(replace(self, gpu=replace(self.gpu, collectives=None)))
        data["gpu"] = self.gpu.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterSpec:
        data = dict(data)
        if isinstance(data.get("gpu"), dict):
            data["gpu"] = GPUSpec.from_dict(data["gpu"])
        return _from_dict(cls, data)


def _check_network(c: ClusterSpec) -> None:
    """Validate the cluster's network description; NICs x rate, when given, set the per-GPU
    network bandwidth (``inter_node_bandwidth_bytes_per_s`` keeps meaning bandwidth per GPU)."""
    if c.intra_node_topology not in INTRA_NODE_TOPOLOGIES:
        raise SpecError(
            f"intra_node_topology={c.intra_node_topology!r} is not supported; use switch "
            "(NVSwitch) or mesh (direct GPU-to-GPU links)",
            field="intra_node_topology",
        )
    nics, rate = c.nics_per_node, c.nic_bandwidth_bytes_per_s
    if nics is not None and rate is not None:
        _positive(c, "nics_per_node")
        if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
            raise SpecError(
                f"nic_bandwidth_bytes_per_s={rate!r} must be a positive number (50e9 for 400 Gb/s)",
                field="nic_bandwidth_bytes_per_s",
            )
        object.__setattr__(c, "inter_node_bandwidth_bytes_per_s", nics * rate / c.gpus_per_node)
    else:
        check_nic_pair(nics, rate)


def check_nic_pair(nics_per_node: object, nic_bandwidth_bytes_per_s: object) -> None:
    """NICs per node and their rate come together or not at all; SpecError naming the missing."""
    if (nics_per_node is None) == (nic_bandwidth_bytes_per_s is None):
        return
    given, missing = (
        ("nics_per_node", "nic_bandwidth_bytes_per_s")
        if nics_per_node is not None
        else ("nic_bandwidth_bytes_per_s", "nics_per_node")
    )
    raise SpecError(
        f"{missing} is required with {given}: give both (e.g. 8 NICs of 50e9 bytes/s, one "
        "direction) or neither",
        field=missing,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingJob:
    """What is trained: sequence length, batch and numeric precision."""

    seq_length: int
    global_batch_size: int
    """Sequences per iteration (``--global-batch-size``)."""
    precision: Precision = "bf16"
    # --- software stack (issue 12; planner.stack_settings) -----------------------------------
    tp_comm_overlap: bool = True
    """``--tp-comm-overlap``: TE userbuffers hide the TP all-gather/reduce-scatter behind the
    GEMMs. True (recommended) emits it wherever it applies (tp > 1 with SP on Hopper or newer);
    False never does, and the TP collectives are then fully exposed."""
    attention_backend: Literal["auto", "flash", "fused", "unfused"] = "auto"
    """``--attention-backend``: 'auto' (Megatron's default: TE picks flash or cuDNN fused),
    'flash', 'fused' or 'unfused' (the pre-flash softmax path: s^2 score traffic per head)."""
    cross_entropy_fusion: Literal["unfused", "native", "te", "te_fp32_grad"] | None = None
    """The loss kernel (mechanisms-facts §5): 'native' = ``--cross-entropy-loss-fusion``
    (recommended), 'te' = with ``--cross-entropy-fusion-impl te`` (core 0.12-0.18; 'te_fp32_grad'
    on TE 2.18), 'unfused' = neither flag. None (unstated) = the release's default, set when the
    job is built: 'native' where the job's Megatron-Core has it (>= 0.8), else 'unfused', as the
    API does (:func:`planner.stack_defaults.release_defaults`)."""
    moe_imbalance: float = 1.2
    """Busiest expert's routed tokens over the mean (>= 1), on the expert GEMMs and the
    all-to-all: 1.0 is force-balanced routing (``--moe-router-force-load-balancing``, as
    NVIDIA benchmarks); 1.2 an auxiliary-loss run (performance-facts §5.3: 1.1-1.5 [U])."""
    moe_grouped_gemm_kernel: Literal["multi_stream", "grouped"] | None = None
    """How Transformer Engine's ``GroupedLinear`` runs the expert GEMMs (mechanisms-facts §4.1):
    'multi_stream' = one cuBLAS GEMM per local expert on 4 streams (TE's default path since
    1.9, still the default in TE 2.18); 'grouped' = one grouped kernel for all experts (CUTLASS
    on Hopper, ``NVTE_USE_CUTLASS_GROUPED_GEMM=1``, TE >= 2.8; cuBLASLt grouped GEMM,
    ``NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1``, TE >= 2.13). None = the planner's choice:
    priced as TE's default (multi_stream); a plan's search picks grouped where the GPU, precision
    and TE version have a grouped kernel and it is faster (:mod:`planner.search.kernel_choice`)."""
    fp8_recipe: Literal["delayed", "tensorwise", "blockwise", "mxfp8"] | None = None
    """``--fp8-recipe`` of an fp8 job (megatron-facts §1.8; :mod:`planner.fp8_recipes`):
    'delayed' (scales from an amax history; Megatron's default, the only recipe before core
    0.12), 'tensorwise' (current per-tensor scaling, TE >= 2.2), 'blockwise' (1x128 / 128x128
    blocks, Hopper, TE >= 2.3), 'mxfp8' (1x32 blocks, Blackwell, TE >= 2.0). None = the
    planner's choice: mxfp8 on Blackwell, tensorwise on Hopper where the release has them, else
    delayed. Only an fp8 job may name one."""
    megatron_core_version: str | None = None
    """The Megatron-Core release the job runs ("0.12"; a NeMo container tag such as "24.09"
    stands for its versions). None = the newest the facts cover (0.19). Decides which stack
    settings exist and how the launch flags are spelled (:mod:`planner.stack_versions`)."""
    te_version: str | None = None
    """The Transformer Engine release ("2.5"). None = the newest the facts cover (2.18)."""
    expandable_segments: bool = False
    """``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` in the launch script: the allocator
    grows segments in place, so most fragmentation goes (mechanisms-facts §6.7; priced by
    ``MemoryOptions.expandable_fragmentation_fraction``). False (the estimator's default
    assumption, PyTorch's default) leaves the environment as it is."""
    release_filled: frozenset[tuple[str, Any]] = field(
        default=frozenset(), repr=False, compare=False
    )
    """Not an input: the (setting, value) pairs set from the release's default when the job was
    built (the setting unstated). ``dataclasses.replace`` carries it, so a replaced job
    re-resolves those settings for its own release, as a job built anew would
    (:func:`planner.stack_defaults.fill_release_defaults`); a replace that states one at a
    value other than the filled one keeps it."""

    def __post_init__(self) -> None:
        from planner.stack_settings import check_stack  # it imports this module

        check_stack(self)
        _positive(self, "seq_length", "global_batch_size")
        if self.precision not in PRECISION_CHOICES:
            raise SpecError(
                f"precision={self.precision!r} is not supported; use bf16, fp8 or fp16 (V100)",
                field="precision",
            )

    @property
    def tokens_per_iteration(self) -> int:
        return self.seq_length * self.global_batch_size


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout(MemorySettings):
    """One parallel layout and its memory settings (fields of the base class,
    :class:`planner.layout_types.MemorySettings`). ``dp`` is derived: num_gpus / (tp pp cp)."""

    tp: int = 1
    pp: int = 1
    vpp: int = 1
    """Virtual pipeline stages per pipeline rank (1 = not interleaved)."""
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    """Expert tensor parallel size; None means 'same as tp' (Megatron's default)."""
    dp: int = 1
    micro_batch_size: int = 1
    recompute: Recompute = "none"
    sequence_parallel: bool | None = None
    """None means 'on when tp > 1' (the planner's default)."""
    optimizer_sharding: OptimizerSharding = "optimizer"
    moe_a2a_overlap: bool | None = None
    """``--overlap-moe-expert-parallel-comm``: hide the expert-parallel all-to-all behind the
    compute of another micro-batch. None means 'on where Megatron allows it' (the planner's
    default, :mod:`planner.space.comm_flags`); False off; True on (a rule rejects it where
    illegal)."""
    moe_dispatcher: MoeDispatcher | None = None
    """MoE token dispatcher: 'alltoall' (NCCL) or 'flex' (DeepEP, which sends a token once per
    destination node). None means 'flex where the expert group spans nodes on Hopper or
    Blackwell, else alltoall' (:mod:`planner.space.comm_flags`)."""
    cp_comm_type: CpCommType | None = None
    """``--cp-comm-type`` of a cp > 1 layout (mechanisms-facts §1.2-1.5): 'p2p' ring, 'all_gather'
    of K/V, 'a2a' (Ulysses), 'a2a+p2p' (all-to-all inside a node, ring across nodes). None means
    the planner's choice: the fastest type the rules allow that fits, in plans and evaluations
    (:mod:`planner.search.cp_choice`); Megatron's default, p2p, where no ring model applies."""

    def __post_init__(self) -> None:
        _positive(self, "tp", "pp", "vpp", "cp", "ep", "etp", "dp", "micro_batch_size")
        if self.cp_comm_type is not None and self.cp_comm_type not in CP_COMM_TYPES:
            raise SpecError(
                f"cp_comm_type={self.cp_comm_type!r} is not one of {', '.join(CP_COMM_TYPES)} "
                "(Transformer Engine's spellings; or null for the planner's choice)",
                field="cp_comm_type",
            )
        if self.moe_dispatcher is not None and self.moe_dispatcher not in MOE_DISPATCHER_CHOICES:
            raise SpecError(
                f"moe_dispatcher={self.moe_dispatcher!r} is not one of alltoall, flex "
                "(or null for the planner's choice)",
                field="moe_dispatcher",
            )
        if self.moe_a2a_overlap is not None and not isinstance(self.moe_a2a_overlap, bool):
            raise SpecError(
                f"moe_a2a_overlap={self.moe_a2a_overlap!r} must be true, false or null (auto)",
                field="moe_a2a_overlap",
            )
        if self.recompute not in RECOMPUTE_CHOICES:
            raise SpecError(
                f"recompute={self.recompute!r} is not one of none, selective, full",
                field="recompute",
            )
        if self.optimizer_sharding not in OPTIMIZER_SHARDING_CHOICES:
            raise SpecError(
                f"optimizer_sharding={self.optimizer_sharding!r} is not one of none, optimizer, "
                "full",
                field="optimizer_sharding",
            )
        from planner.layout_checks import check_memory_settings  # it imports this module

        check_memory_settings(self)

    @property
    def expert_tp(self) -> int:
        return self.tp if self.etp is None else self.etp

    @property
    def sp(self) -> bool:
        return self.tp > 1 if self.sequence_parallel is None else self.sequence_parallel

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    def normalized(self) -> Layout:
        """The same layout with defaults made explicit (etp, sequence_parallel; the automatic
        moe_a2a_overlap and moe_dispatcher need the model and stay None:
        :func:`planner.space.comm_flags.resolve`)."""
        return replace(self, etp=self.expert_tp, sequence_parallel=self.sp)

    def to_dict(self) -> dict[str, Any]:
        n = self.normalized()
        return {f.name: getattr(n, f.name) for f in fields(n)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Layout:
        return _from_dict(cls, data)


def _from_dict(cls: type[_T], data: dict[str, Any]) -> _T:
    """Build a dataclass from a mapping, naming unknown keys instead of a bare TypeError."""
    if not isinstance(data, dict):
        raise SpecError(f"{cls.__name__} must be an object, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(
            f"unknown field(s) for {cls.__name__}: {', '.join(unknown)}; "
            f"known fields: {', '.join(sorted(known))}",
            field=unknown[0],
        )
    required = [
        f.name
        for f in fields(cls)  # type: ignore[arg-type]
        if f.default is MISSING and f.default_factory is MISSING and f.name not in data
    ]
    if required:
        raise SpecError(
            f"{cls.__name__} is missing required field(s): {', '.join(required)}",
            field=required[0],
        )
    try:
        return cls(**data)
    except TypeError as exc:  # a value of the wrong type where the code does arithmetic
        raise SpecError(f"{cls.__name__}: {exc}") from exc
