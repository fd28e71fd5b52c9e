"""Megatron-LM's side: launch flags, reading them back, and parsing its training logs."""

from planner.megatron.args import ParsedArgs, parse_megatron_args
from planner.megatron.flags import LaunchSpec, launch_spec, megatron_args
from planner.megatron.log import LogParseError, LogParseResult, parse_megatron_log

__all__ = [
    "LaunchSpec",
    "LogParseError",
    "LogParseResult",
    "ParsedArgs",
    "launch_spec",
    "megatron_args",
    "parse_megatron_args",
    "parse_megatron_log",
]
