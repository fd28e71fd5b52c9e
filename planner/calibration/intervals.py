"""How sure a prediction is: a band from cross-validated residuals of its regime, and the ways a
plan extrapolates beyond anything calibrated (issue 12 item 9).

The table is data (``models_db/intervals/throughput.json``, written by ``bench/calibration.py``
from leave-one-source-out residuals, never in-sample ones); this module only reads it. A band is
the campaign noise model's 80 % predictive band (:mod:`planner.calibration.interval_bands`) of
measured / predicted tokens/s per GPU, centred on the held-out rows of the same regime (dense or
MoE, one node or several, cp > 1, fp8); a regime with fewer than ``min_rows`` effective rows
(rows of one campaign share errors, so they count by the design effect) falls back to its
parent (the key with its last part dropped), up to all rows.
A GPU whose profile is transferred rather than fitted takes the leave-one-GPU-type-out band,
which measures exactly that procedure.

The band a response shows keeps the regime's centre and within-campaign sd but, where the table
carries a transfer spread, replaces the shared rows' between-campaign sd by the spread of every
campaign never fitted (:mod:`planner.calibration.campaign_spread`): a user's cluster is a
campaign the fit never saw, and the shared rows' four campaigns understate how far such a
campaign sits (:func:`shown_band`). A calibrated cluster replaces that spread by its level's error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from planner.calibration.campaign_spread import (
    TransferSpread,
    calibrated_offset_sd,
    new_campaign_band,
)
from planner.fp8_recipes import effective_recipe
from planner.model.params import param_counts
from planner.performance.profile import PerformanceProfile
from planner.space.comm_flags import resolve
from planner.specs import ClusterSpec, Layout, ModelSpec, TrainingJob

REGIME_PARTS = ("moe", "nodes", "cp", "precision")
"""Parts of a regime key, most general first: the fallback drops parts from the end."""
TRANSFERRED = "transferred-gpu"


def regime_parts(model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, cp: int) -> list[str]:
    return [
        "moe" if model.is_moe else "dense",
        "multi-node" if cluster.num_nodes > 1 else "single-node",
        "cp>1" if cp > 1 else "cp=1",
        "fp8" if job.precision == "fp8" else "bf16",
    ]


def regime_key(parts: Sequence[str]) -> str:
    return "/".join(parts) if parts else "all"


def fallback_keys(parts: Sequence[str]) -> list[str]:
    """The regime's key, then each parent's, down to 'all'."""
    return [regime_key(parts[:n]) for n in range(len(parts), -1, -1)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    n: int
    low: float
    """10th percentile of measured / predicted."""
    high: float
    """90th percentile of measured / predicted."""
    campaigns: int = 0
    """Campaigns (a source on one GPU type) among the rows (0: not recorded)."""
    effective_rows: float | None = None
    """Independent rows the rows are worth (None: not recorded, the rows count)."""
    log_centre: float | None = None
    """The model band's centre, mean log(measured / predicted) (None: a conformal band)."""
    log_sd: float | None = None
    """The model band's predictive sd of log(measured / predicted)."""
    df: int | None = None
    """Degrees of freedom of the model band's t quantile (campaigns of the noise estimate - 1)."""
    within_log_sd: float | None = None
    """sigma_w of the model band's noise (None: not recorded)."""
    centre_log_sd: float | None = None
    """sd of the model band's centre, sqrt(Var(mu)) (None: not recorded)."""

    @property
    def weight(self) -> float:
        """The rows the ``min_rows`` rule counts: effective rows where recorded."""
        return float(self.n if self.effective_rows is None else self.effective_rows)


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibratedRange:
    """What the calibration rows span (a prediction outside it extrapolates)."""

    gpus: tuple[str, ...]
    parameters: tuple[float, float]
    seq_length: tuple[int, int]
    num_gpus: tuple[int, int]
    max_experts: int
    max_topk: int
    min_expert_ffn_ratio: float
    """Smallest expert FFN width / hidden size among the MoE rows (fine-grained MoE is below)."""
    max_cp: int
    cp_across_nodes: bool
    stack: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Each stack setting's values among the rows (:func:`stack_values`; a setting missing
    here is not checked): a prediction with another value extrapolates."""


STACK_CHECKED = (
    "tp_comm_overlap",
    "attention_backend",
    "cross_entropy_fusion",
    "cuda_graphs",
    "grad_reduce_dtype",
    "moe_dispatcher",
    "moe_a2a_overlap",
)
"""Stack settings that change the predicted speed (issue 12 item 1) and whose calibrated values
are recorded; the ``moe_`` ones only for MoE models, and ``fp8_recipe`` (resolved per GPU and
release) only for fp8 jobs."""


def stack_values(
    model: ModelSpec, cluster: ClusterSpec, job: TrainingJob, layout: Layout
) -> dict[str, str]:
    """The stack a prediction runs, each setting as text, with the planner's 'auto' choices
    (dispatcher, EP overlap) made explicit as :mod:`planner.space.comm_flags` prices them."""
    lay = resolve(model, cluster, layout, tp_overlap_on=job.tp_comm_overlap)
    out = {}
    for name in STACK_CHECKED:
        if name.startswith("moe_") and not model.is_moe:
            continue
        value = getattr(job, name) if hasattr(job, name) else getattr(lay, name)
        out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    # the recipe the job runs on this GPU (unset resolves per GPU and release); fp8 jobs only
    recipe = effective_recipe(job, cluster.gpu)
    if recipe is not None:
        out["fp8_recipe"] = recipe
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class IntervalTable:
    low_quantile: float
    high_quantile: float
    min_rows: int
    bands: dict[str, Band]
    calibrated: CalibratedRange
    source: dict[str, Any] = field(default_factory=dict)
    transfer: TransferSpread | None = None
    """The between-campaign spread of a campaign the fit never saw (None: the bands as built,
    with the shared rows' sigma_b; :mod:`planner.calibration.campaign_spread`)."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IntervalTable:
        cal = dict(data["calibrated"])
        for key in ("gpus", "parameters", "seq_length", "num_gpus"):
            cal[key] = tuple(cal[key])
        cal["stack"] = {k: tuple(v) for k, v in cal.get("stack", {}).items()}
        return cls(
            low_quantile=float(data["low_quantile"]),
            high_quantile=float(data["high_quantile"]),
            min_rows=int(data["min_rows"]),
            bands={k: Band(**v) for k, v in data["bands"].items()},
            calibrated=CalibratedRange(**cal),
            source=dict(data.get("source", {})),
            transfer=(TransferSpread.from_dict(data["transfer"]) if data.get("transfer") else None),
        )

    def band(self, parts: Sequence[str], *, transferred: bool = False) -> tuple[str, Band]:
        """The band of the most specific regime with enough rows: (its key, the band)."""
        keys = ([TRANSFERRED] if transferred else []) + fallback_keys(parts)
        for key in keys:
            band = self.bands.get(key)
            if band is not None and band.weight >= self.min_rows:
                return key, band
        return "all", self.bands["all"]


def is_transferred(profile: PerformanceProfile) -> bool:
    return str(profile.provenance.get("kind", "")) != "fitted"


def uncertainty(
    table: IntervalTable,
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layout: Layout,
    profile: PerformanceProfile,
    *,
    tokens_per_s_per_gpu: float,
    step_time_s: float,
) -> dict[str, Any]:
    """The fields a layout report's performance block carries about its uncertainty."""
    parts = regime_parts(model, cluster, job, layout.cp)
    transferred = is_transferred(profile)
    key, band = table.band(parts, transferred=transferred)
    level = profile.provenance.get("cluster_level")
    low, high, words, extra = shown_band(table, band, level)
    return {
        "tokens_per_s_per_gpu_interval": [tokens_per_s_per_gpu * low, tokens_per_s_per_gpu * high],
        # step time is inversely proportional to tokens/s at a fixed batch
        "step_time_interval_s": [step_time_s / high, step_time_s / low],
        "interval": {
            "band": words,
            "regime": key,
            "layout_regime": regime_key(parts),
            **fallback_note(table, parts, key, transferred=transferred),
            "rows": band.n,
            "effective_rows": band.weight,
            **extra,
        },
        "extrapolation": extrapolation(table.calibrated, model, cluster, job, layout, profile),
    }


def shown_band(
    table: IntervalTable, band: Band, level: dict[str, Any] | None
) -> tuple[float, float, str, dict[str, Any]]:
    """(low, high, the rule in words, extra interval fields) of the band a prediction shows.

    With a transfer spread in the table (and a model band), the band is the one for a campaign
    the fit never saw (:func:`planner.calibration.campaign_spread.new_campaign_band`): the
    regime's centre and sigma_w, tau in place of the shared rows' sigma_b; a calibrated cluster
    replaces tau by its level's error. Without one, the table's band, narrowed as before."""
    spread, centre, centre_sd = table.transfer, band.log_centre, band.centre_log_sd
    if spread is None or centre is None or centre_sd is None:
        return _table_band(table, band, level)
    offset = calibrated_offset_sd(level, spread.log_sd)
    calibrated = offset is not None and offset < spread.log_sd
    q = (table.low_quantile, table.high_quantile)

    def make(off: float | None) -> tuple[float, float, float]:
        return new_campaign_band(
            centre,
            centre_sd,
            spread,
            low_q=q[0],
            high_q=q[1],
            within_log_sd=band.within_log_sd,
            offset_log_sd=off,
        )

    low, high, sd = make(None)
    extra: dict[str, Any] = {"between_campaign_log_sd": round(spread.log_sd, 4), "df": spread.df}
    pct = round(100 * (q[1] - q[0]))
    shared = len(spread.campaigns) - spread.published_campaigns
    words = (
        f"{pct} % predictive band widened for a campaign the fit never saw: centre and within-"
        f"campaign sd from the regime's leave-one-source-out residuals, between-campaign sd "
        f"{spread.log_sd:.3f} (log) from {len(spread.campaigns)} campaigns never fitted "
        f"({shared} of the shared rows, {spread.published_campaigns} of published runs), "
        f"t quantile on {spread.df} degrees of freedom"
    )
    if calibrated:
        low, high, own = make(offset)
        narrow = own / sd
        words += f"; narrowed x{narrow:.2f} by the cluster's calibrated level"
        extra["cluster_level_narrowing"] = round(narrow, 4)
        extra["cluster_offset_log_sd"] = round(float(offset or 0.0), 4)
    return low, high, words, extra


def _table_band(
    table: IntervalTable, band: Band, level: dict[str, Any] | None
) -> tuple[float, float, str, dict[str, Any]]:
    """The table's band as built (no transfer spread), narrowed by a calibrated level."""
    narrow = band_narrowing(level)
    low, high = band.low, band.high
    if narrow < 1.0:  # the log half-widths around the band's log centre
        centre = math.sqrt(low * high)
        low, high = centre * (low / centre) ** narrow, centre * (high / centre) ** narrow
    words = _describe(table, band)
    if narrow >= 1.0:
        return low, high, words, {}
    words += f", narrowed x{narrow:.2f} by the cluster's calibrated level"
    return low, high, words, {"cluster_level_narrowing": round(narrow, 4)}


def fallback_note(
    table: IntervalTable, parts: Sequence[str], key: str, *, transferred: bool
) -> dict[str, str]:
    """Why the band is not the layout's own regime's ({} when it is): a plan must not present a
    band measured mostly on other kinds of layouts as its own (a MoE layout takes 'all', whose
    rows are mostly dense, while the MoE rows are too few)."""
    own = regime_key(parts)
    if key == own:
        return {}
    if transferred and key == TRANSFERRED:
        why = (
            "the GPU's profile is transferred, not fitted: the band is the leave-one-GPU-type-out "
            "band of all rows, not one of this regime"
        )
        return {"fallback": why}
    mine = table.bands.get(own)
    rows = (
        "no calibrated rows"
        if mine is None
        else f"{mine.weight:.1f} effective held-out rows (fewer than {table.min_rows})"
    )
    parent = table.bands[key]
    return {
        "fallback": f"the layout's regime {own} has {rows}: the band is that of {key} "
        f"({parent.n} rows, {parent.weight:.1f} effective), not measured on this regime alone"
    }


def _describe(table: IntervalTable, band: Band) -> str:
    """The band's rule in words (the table may hold model or conformal bands)."""
    pct = round(100 * (table.high_quantile - table.low_quantile))
    if band.df is not None:
        return (
            f"{pct} % predictive band of the campaign noise model on leave-one-source-out "
            f"residuals (t quantile, {band.df} degrees of freedom)"
        )
    return (
        f"{pct} % split-conformal band of leave-one-source-out residuals "
        "(ranks counted in effective rows)"
    )


def band_narrowing(level: dict[str, float] | None) -> float:
    """How much a calibrated cluster's prediction band narrows (1: not at all).

    The bands are held-out errors of clusters the fit never saw: there a new cluster's offset
    has its full spread sigma_b. Once the cluster's level is fitted its offset is known to the
    posterior sd, so a row's log error has the variance sd^2 + sigma_w^2 instead of
    sigma_b^2 + sigma_w^2 (the noise model, :mod:`planner.calibration.noise`), and the band's
    log half-widths scale by the square root of the ratio. ``level``: a profile's
    ``provenance["cluster_level"]`` (:class:`planner.calibration.level.ClusterLevel`)."""
    if not level:
        return 1.0
    post, shared = float(level["log_sd"]), float(level["prior_log_sd"])
    within = float(level.get("within_log_sd", 0.0))
    if shared <= 0 or post >= shared:
        return 1.0
    return math.sqrt((post**2 + within**2) / (shared**2 + within**2))


def extrapolation(
    cal: CalibratedRange,
    model: ModelSpec,
    cluster: ClusterSpec,
    job: TrainingJob,
    layout: Layout,
    profile: PerformanceProfile,
) -> list[str]:
    """Why this prediction lies outside the calibrated data, in words (empty: inside it)."""
    out: list[str] = []
    gpu = cluster.gpu.name
    if is_transferred(profile):
        origin = profile.provenance.get("transferred_from")
        how = f"transferred from {origin}" if origin else "architecture priors"
        out.append(f"the {gpu} profile is not fitted to measurements of this GPU ({how})")
    if model.is_moe:
        ratio = model.expert_ffn_hidden_size / model.hidden_size
        experts = model.num_experts or 0
        if (
            experts > cal.max_experts
            or model.moe_router_topk > cal.max_topk
            or ratio < cal.min_expert_ffn_ratio
        ):
            out.append(
                f"fine-grained MoE ({experts} experts, top-{model.moe_router_topk}, expert FFN "
                f"{ratio:.2f}x hidden): calibrated MoE rows have at most {cal.max_experts} "
                f"experts, top-{cal.max_topk}, expert FFN >= {cal.min_expert_ffn_ratio:.2f}x"
            )
    if layout.cp > 1:
        if layout.cp > cal.max_cp:
            out.append(f"cp={layout.cp} is above the calibrated cp <= {cal.max_cp}")
        if layout.tp * layout.cp > cluster.gpus_per_node and not cal.cp_across_nodes:
            out.append(
                f"context parallelism across nodes (tp x cp = {layout.tp * layout.cp} > "
                f"{cluster.gpus_per_node} GPUs per node): no calibrated run did that"
            )
    for name, setting in stack_values(model, cluster, job, layout).items():
        seen = cal.stack.get(name)
        if seen and setting not in seen:
            out.append(f"{name}={setting}: no calibrated run used it (they ran {', '.join(seen)})")
    params = float(param_counts(model).total)
    lo, hi = cal.parameters
    if not lo * 0.8 <= params <= hi * 1.25:
        out.append(
            f"model size {params / 1e9:.3g}B is outside the calibrated "
            f"{lo / 1e9:.3g}B-{hi / 1e9:.3g}B"
        )
    for what, value, (a, b) in (
        ("sequence length", job.seq_length, cal.seq_length),
        ("GPU count", cluster.num_gpus, cal.num_gpus),
    ):
        if not a <= value <= b:
            out.append(f"{what} {value} is outside the calibrated {a}-{b}")
    return out
