"""Option groups shared by ``planner evaluate`` and ``planner plan``, declared once.

Typer has no parameter groups, so :func:`shared_options` adds a group's options to a command's
signature (Typer reads ``__signature__``) and the command receives them in ``**shared``. Each
option is named as the request field it sets (``--tp-comm-overlap`` is ``tp_comm_overlap``), so
an error from the planning layer names the flag to fix. The groups:

* the layout's memory settings (issue 13) and MoE stack choices, one value each in evaluate, a
  comma list in plan where the search varies them;
* the job's software stack (issue 12 item 1), built from ``app.planning.stack_fields``: one more
  descriptor there is one more flag here, with no line to add;
* the cluster description (issue 12 item 2): network per GPU, or NICs per node and their rate,
  and the intra-node topology.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from app.catalog.network import NIC_RATE_HELP, NICS_HELP
from app.cli.common import A2AOverlapOpt, DispatcherOpt
from app.cli.memory_options import (
    ActOffloadOpt,
    Fp8GatherOpt,
    GradDtypeOpt,
    GraphsOpt,
    LayoutOpt,
    ModulesOpt,
    NumLayersOpt,
    OffloadModulesOpt,
    OptOffloadOpt,
    StateDtypeOpt,
)
from app.planning.stack_fields import STACK_FIELDS, StackField

Command = TypeVar("Command", bound=Callable[..., Any])
Opt = typer.Option


@dataclass(frozen=True, slots=True)
class Shared:
    """One option of a group: its parameter name (the request field) and Annotated type."""

    name: str
    annotation: Any


def shared_options(*groups: tuple[Shared, ...]) -> Callable[[Command], Command]:
    """Add the groups' options (default None: unset) to a command that takes ``**shared``."""

    def decorate(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        extra = [
            inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation=o.annotation)
            for group in groups for o in group
        ]  # fmt: skip
        command.__signature__ = signature.replace(parameters=own + extra)  # type: ignore[attr-defined]
        return command

    return decorate


MEMORY_OPTIONS = (
    Shared("moe_a2a_overlap", A2AOverlapOpt),
    Shared("moe_dispatcher", DispatcherOpt),
    Shared("grad_reduce_dtype", GradDtypeOpt),
    Shared("optimizer_state_dtype", StateDtypeOpt),
    Shared("fp8_param_gather", Fp8GatherOpt),
    Shared("recompute_modules", ModulesOpt),
    Shared("recompute_num_layers", NumLayersOpt),
    Shared("cuda_graphs", GraphsOpt),
    Shared("activation_offload_layers", ActOffloadOpt),
    Shared("optimizer_offload_fraction", OptOffloadOpt),
    Shared("pipeline_layout", LayoutOpt),
    Shared("activation_offload_modules", OffloadModulesOpt),
)


def _stack_option(spec: StackField) -> Shared:
    """The flag of one stack descriptor: --x/--no-x for a switch, text or a number otherwise."""
    flag = "--" + spec.name.replace("_", "-")
    default = spec.default
    if isinstance(default, bool) or default is None:  # not a dict lookup: 1.0 == True
        default = {True: "on", False: "off", None: f"the {spec.unset}"}[default]
    text = f"{spec.help} (default {default})"
    if spec.kind == "bool":
        return Shared(spec.name, Annotated[bool | None, Opt(f"{flag}/--no-{flag[2:]}", help=text)])
    if spec.kind == "choice":
        return Shared(spec.name, Annotated[str | None, Opt(flag, help=text)])
    return Shared(spec.name, Annotated[float | None, Opt(flag, help=text)])


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def _flags(text: str) -> str:
    """The API's field names in a shared help text as this CLI's flags (nic_bandwidth_bytes_per_s
    -> --nic-bandwidth-bytes-per-s)."""
    return re.sub(r"\b[a-z]+(?:_[a-z]+)+\b", lambda m: "--" + m.group().replace("_", "-"), text)


STACK_OPTIONS = tuple(_stack_option(spec) for spec in STACK_FIELDS)
CLUSTER_OPTIONS = (
    Shared(
        "inter_node_bandwidth_bytes_per_s",
        Annotated[float | None, Opt(help="Network per GPU, bytes/s one direction (50e9).")],
    ),
    Shared("nics_per_node", Annotated[int | None, Opt(help=_sentence(_flags(NICS_HELP)))]),
    Shared(
        "nic_bandwidth_bytes_per_s",
        Annotated[float | None, Opt(help=_sentence(NIC_RATE_HELP))],
    ),
    Shared(
        "intra_node_topology",
        Annotated[str | None, Opt(help="switch (NVSwitch) or mesh (xGMI, V100 NVLink boards).")],
    ),
)
