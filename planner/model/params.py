"""Parameter counts of a decoder-only transformer, split the way parallelism shards them.

Follows Megatron's ``compute_weight_and_optimizer_memory`` (megatron-facts §4.1) and goes past it
where Megatron is silent: linear biases (``add_bias_linear`` / ``add_qkv_bias``), learned absolute
position embeddings (max_positions x h), QK-norm weights, learned attention sinks (a per layer)
and the MTP block's eh-projection and norms are all counted. Each layer's parameters are split
into the part that tensor parallelism shards, the part every TP rank replicates (norms, router,
MLA down-projections) and the routed experts (sharded by expert parallelism), because memory
needs that split.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.specs import ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerParams:
    """Parameters of one decoder layer, by block."""

    attention: int
    """All attention weights and biases (QKV/MLA projections, output projection, QK norms)."""
    attention_replicated: int
    """The part of ``attention`` that TP does not shard (QK norms, MLA down-projections+norms)."""
    mlp: int
    """Dense MLP (0 in an MoE layer)."""
    shared_experts: int
    """Shared experts of an MoE layer (TP-sharded like a dense MLP)."""
    routed_experts: int
    """All E routed experts (sharded by expert-TP x EP)."""
    routed_experts_active: int
    """The K routed experts a token uses."""
    router: int
    """Router weight (and bias), replicated across TP."""
    norms: int
    """The two per-layer norms (input and pre-MLP), replicated across TP."""

    @property
    def tp_sharded(self) -> int:
        """Weights that tensor parallelism divides by t."""
        return self.attention - self.attention_replicated + self.mlp + self.shared_experts

    @property
    def replicated(self) -> int:
        """Weights that every TP rank holds whole."""
        return self.attention_replicated + self.router + self.norms

    @property
    def total(self) -> int:
        return self.tp_sharded + self.replicated + self.routed_experts

    @property
    def active(self) -> int:
        return self.tp_sharded + self.replicated + self.routed_experts_active


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamCounts:
    """Parameter counts of a whole model (megatron-facts §4.1 plus the gaps listed in §4.5)."""

    vocab_size: int
    """The vocabulary the embedding counts use (padded or not, as requested)."""
    embedding: int
    """Word embedding V*h plus learned absolute position embedding max_positions*h."""
    position_embedding: int
    """The learned absolute position part of ``embedding`` (replicated across TP)."""
    output_layer: int
    """Untied output layer V*h; 0 when tied to the embedding."""
    dense_layer: LayerParams
    moe_layer: LayerParams
    """Zero everywhere for a dense model."""
    num_dense_layers: int
    num_moe_layers: int
    final_norm: int
    mtp_layer: LayerParams
    """The transformer layer inside one MTP depth (MoE if the last decoder layer is MoE)."""
    mtp_extra: int
    """Per MTP depth: eh-projection 2h*h (TP-sharded), plus enorm, hnorm and final norm."""
    mtp_extra_replicated: int
    """The norm part of ``mtp_extra`` (replicated across TP)."""
    mtp_num_layers: int

    @property
    def decoder(self) -> int:
        """All decoder layers, without embeddings, final norm or MTP."""
        return (
            self.num_dense_layers * self.dense_layer.total
            + self.num_moe_layers * self.moe_layer.total
        )

    @property
    def mtp_block(self) -> int:
        return self.mtp_num_layers * (self.mtp_layer.total + self.mtp_extra)

    @property
    def total(self) -> int:
        return self.decoder + self.final_norm + self.mtp_block + self.embedding + self.output_layer

    @property
    def active(self) -> int:
        """Parameters one token touches: routed experts counted K times, MTP included at K."""
        return (
            self.num_dense_layers * self.dense_layer.active
            + self.num_moe_layers * self.moe_layer.active
            + self.final_norm
            + self.mtp_num_layers * (self.mtp_layer.active + self.mtp_extra)
            + self.embedding
            + self.output_layer
        )


def norm_params(model: ModelSpec, width: int) -> int:
    """RMSNorm has a weight, LayerNorm a weight and a bias (megatron-facts §4.1, nu = 1 or 2)."""
    return width * (1 if model.normalization == "RMSNorm" else 2)


def mlp_params(model: ModelSpec, ffn: int) -> int:
    """2*h*F*gamma with gamma = 3/2 for SwiGLU (megatron-facts §4.1), plus biases if enabled."""
    h = model.hidden_size
    fc1_out = 2 * ffn if model.gated_linear_unit else ffn
    weights = h * fc1_out + ffn * h
    biases = fc1_out + h if model.add_bias_linear else 0
    return weights + biases


def attention_params(model: ModelSpec) -> tuple[int, int]:
    """(all attention parameters, the TP-replicated part), megatron-facts §4.1."""
    h = model.hidden_size
    a = model.num_attention_heads
    # the output projection's bias, and the learned attention sinks: one scalar per query head
    # (catalog-facts §1.6), split over TP with the heads [inferred]
    out_bias = h if model.add_bias_linear else 0
    out_bias += a if model.softmax_type == "learnable" else 0
    if model.multi_latent_attention:
        d_qk = model.qk_head_dim or 0
        d_rope = model.qk_pos_emb_head_dim or 0
        d_v = model.v_head_dim or 0
        kv_lora = model.kv_lora_rank or 0
        replicated = 0
        if model.q_lora_rank is None:
            q_part = h * a * (d_qk + d_rope)
        else:
            # q_lora*(h + a*(d_qk+d_rope) + nu): down-proj and its norm are TP-replicated
            q_down = h * model.q_lora_rank + norm_params(model, model.q_lora_rank)
            q_part = q_down + model.q_lora_rank * a * (d_qk + d_rope)
            replicated += q_down
        # kv_lora*(h + a*(d_qk+d_v) + nu) + h*d_rope (decoupled RoPE key), down-proj replicated
        kv_down = h * (kv_lora + d_rope) + norm_params(model, kv_lora)
        kv_part = kv_down + kv_lora * a * (d_qk + d_v)
        replicated += kv_down
        return q_part + kv_part + a * d_v * h + out_bias, replicated
    d_k = model.head_dim
    q = a * d_k
    kv = model.query_groups * d_k
    # Q and O projections 2*h*(a*d_k), K and V 2*h*(g*d_k) (megatron-facts §4.1)
    weights = 2 * h * q + 2 * h * kv
    qkv_bias = q + 2 * kv if (model.add_bias_linear or model.add_qkv_bias) else 0
    qk_norm = 2 * norm_params(model, d_k) if model.qk_layernorm else 0
    return weights + qkv_bias + out_bias + qk_norm, qk_norm


def _layer(model: ModelSpec, *, moe: bool) -> LayerParams:
    attention, attention_replicated = attention_params(model)
    norms = 2 * norm_params(model, model.hidden_size)
    if not moe:
        return LayerParams(
            attention=attention,
            attention_replicated=attention_replicated,
            mlp=mlp_params(model, model.ffn_hidden_size),
            shared_experts=0,
            routed_experts=0,
            routed_experts_active=0,
            router=0,
            norms=norms,
        )
    experts = model.num_experts or 1
    one_expert = mlp_params(model, model.expert_ffn_hidden_size)
    shared_ffn = model.shared_expert_ffn_hidden_size
    # router h*E (+E with add_bias_linear), megatron-facts §4.1
    router = model.hidden_size * experts + (experts if model.add_bias_linear else 0)
    return LayerParams(
        attention=attention,
        attention_replicated=attention_replicated,
        mlp=0,
        shared_experts=mlp_params(model, shared_ffn) if shared_ffn else 0,
        routed_experts=experts * one_expert,
        routed_experts_active=model.moe_router_topk * one_expert,
        router=router,
        norms=norms,
    )


_ZERO_LAYER = LayerParams(
    attention=0,
    attention_replicated=0,
    mlp=0,
    shared_experts=0,
    routed_experts=0,
    routed_experts_active=0,
    router=0,
    norms=0,
)


def param_counts(
    model: ModelSpec, *, vocab_size: int | None = None, seq_length: int | None = None
) -> ParamCounts:
    """Count the model's parameters.

    ``vocab_size`` is the vocabulary to count (pass ``padded_vocab(model, tp)`` for what
    Megatron allocates); None uses the unpadded ``model.vocab_size``. ``seq_length`` is the
    fallback size of a learned position table when ``max_position_embeddings`` is unset.
    """
    h = model.hidden_size
    v = model.vocab_size if vocab_size is None else vocab_size
    positions = 0
    if model.position_embedding_type == "learned_absolute":
        positions = (model.max_position_embeddings or seq_length or 0) * h
    embedding = v * h + positions
    output_layer = v * h if model.untie_embeddings_and_output_weights else 0
    pattern = model.moe_layer_pattern()
    num_moe = sum(pattern)
    dense_layer = _layer(model, moe=False)
    moe_layer = _layer(model, moe=True) if num_moe else _ZERO_LAYER
    # MTP: one transformer layer per depth, MoE iff the last decoder layer is (megatron-facts §4.1)
    mtp_layer = moe_layer if pattern[-1] else dense_layer
    mtp_norms = 3 * norm_params(model, h)  # enorm, hnorm, final layernorm of the MTP block
    return ParamCounts(
        vocab_size=v,
        embedding=embedding,
        position_embedding=positions,
        output_layer=output_layer,
        dense_layer=dense_layer,
        moe_layer=moe_layer,
        num_dense_layers=model.num_layers - num_moe,
        num_moe_layers=num_moe,
        final_norm=norm_params(model, h),
        mtp_layer=mtp_layer if model.mtp_num_layers else _ZERO_LAYER,
        mtp_extra=(2 * h * h + mtp_norms) if model.mtp_num_layers else 0,
        mtp_extra_replicated=mtp_norms if model.mtp_num_layers else 0,
        mtp_num_layers=model.mtp_num_layers,
    )
