"""The model's arithmetic: parameter counts, FLOPs and the padded vocabulary, layer shapes,
the pipeline split, Hugging Face configs."""

from planner.model.flops import VOCAB_DIVISIBLE_BY, flops_per_iteration, padded_vocab
from planner.model.hf_config import model_from_hf_config
from planner.model.params import ParamCounts, param_counts
from planner.model.pipeline import PipelineSplit, StageLayers, split_layers, stage_layers
from planner.model.pipeline_layout import PipelineLayout, balanced_layout, parse_pipeline_layout
from planner.model.shapes import LayerShapes, layer_shapes

__all__ = [
    "VOCAB_DIVISIBLE_BY",
    "LayerShapes",
    "ParamCounts",
    "PipelineLayout",
    "PipelineSplit",
    "StageLayers",
    "balanced_layout",
    "flops_per_iteration",
    "layer_shapes",
    "model_from_hf_config",
    "padded_vocab",
    "param_counts",
    "parse_pipeline_layout",
    "split_layers",
    "stage_layers",
]
