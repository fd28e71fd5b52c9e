"""The plan form's software stack and cluster description (issue 12 items 1-2; issue 14 item 5).

The stack inputs are built from the descriptors of ``app.planning.stack_fields`` (one more
descriptor is one more input, with no line to add here or in ``_stack_fields.html``); the
cluster description is the request's network fields. Inputs carry the request field names, so an
error from the planning layer (``nics_per_node`` without a rate, a per-GPU bandwidth that
disagrees with the NICs) lands on its input. Only syntax is checked here; a value equal to the
planner's default is left out of the request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.catalog.network import NIC_RATE_HELP, NICS_HELP, TOPOLOGY_HELP, TOPOLOGY_LABELS
from app.planning.stack_fields import STACK_FIELDS, StackField
from app.web import numbers
from planner.specs import SpecError

SWITCH = {"on": True, "off": False}
PRESET = "preset"
"""The topology select's first choice: the cluster's own (the preset's, or NVSwitch)."""


@dataclass(frozen=True, slots=True)
class Input:
    """One input of the group as the template draws it."""

    name: str
    label: str
    hint: str
    """A short line under the input (the full help is its title)."""
    help: str
    options: tuple[tuple[str, str], ...] = ()
    """(value, text) of a select; empty for a text input."""
    placeholder: str = ""


def _stack_input(spec: StackField) -> Input:
    if spec.kind == "bool":
        on, off = ("on (recommended)", "off") if spec.default else ("on", "off (recommended)")
        return Input(spec.name, spec.label, spec.flag, spec.help, (("on", on), ("off", off)))
    if spec.kind == "choice":
        options = tuple((c, f"{c} (recommended)" if c == spec.default else c) for c in spec.choices)
        if spec.default is None:  # the planner chooses (or a version: the newest) unless set
            options = (("", spec.unset), *options)
        return Input(spec.name, spec.label, spec.flag, spec.help, options)
    return Input(spec.name, spec.label, spec.flag, spec.help, placeholder=f"{spec.default:g}")


STACK_INPUTS = tuple(_stack_input(spec) for spec in STACK_FIELDS)
CLUSTER_INPUTS = (
    Input("nics_per_node", "NICs per node", "per GPU: NICs x rate / GPUs per node", NICS_HELP,
          placeholder="preset's, e.g. 8"),
    Input("nic_bandwidth_bytes_per_s", "NIC rate (bytes/s)", "400 Gb/s = 50e9, one direction",
          NIC_RATE_HELP, placeholder="50e9"),
    Input("inter_node_bandwidth_bytes_per_s", "Or: network per GPU (bytes/s)",
          "instead of the NICs", "network bandwidth per GPU, one direction",
          placeholder="preset's, e.g. 50e9"),
    Input("intra_node_topology", "Inside a node", "mesh: MI300X xGMI, V100 boards", TOPOLOGY_HELP,
          ((PRESET, "the cluster's"), *TOPOLOGY_LABELS.items())),
)  # fmt: skip
INPUTS = STACK_INPUTS + CLUSTER_INPUTS
NAMES = tuple(i.name for i in INPUTS)
DEFAULTS: dict[str, Any] = {
    **{
        s.name: ("on" if s.default else "off") if s.kind == "bool" else s.default or ""
        for s in STACK_FIELDS
        if s.kind != "number"
    },
    "intra_node_topology": PRESET,
}
_NUMBERS = {"nics_per_node": int, "nic_bandwidth_bytes_per_s": float,
            "inter_node_bandwidth_bytes_per_s": float}  # fmt: skip


def stack_request(values: Mapping[str, Any]) -> dict[str, Any]:
    """The stack and cluster-description fields of a plan request, from the form's values."""
    req: dict[str, Any] = {}
    for spec in STACK_FIELDS:
        text = str(values.get(spec.name) or "").strip()
        if not text:
            continue
        if spec.kind == "bool":
            if text not in SWITCH:
                raise SpecError("choose on or off", field=spec.name)
            value: Any = SWITCH[text]
        elif spec.kind == "number":
            value = _number(spec.name, text, float)
        else:
            value = text  # the request's Literal names the choices when it is not one
        if value != spec.default:
            req[spec.name] = value
    for name, kind in _NUMBERS.items():
        text = str(values.get(name) or "").strip()
        if text:
            req[name] = _number(name, text, kind)
    topology = str(values.get("intra_node_topology") or PRESET)
    if topology != PRESET:
        req["intra_node_topology"] = topology
    return req


def _number(name: str, text: str, kind: type[int] | type[float]) -> int | float:
    value = numbers.read_whole(text) if kind is int else numbers.read_decimal(text)
    if value is not None:  # ASCII decimal only (app/web/numbers.py): not '٣' or '1_000'
        return value
    message = numbers.refusal(name, text, whole=kind is int)
    if name.endswith("bytes_per_s"):  # the example only where the unit is bytes per second
        message = message.replace(" such as 50, 0.5 or 50e9", " such as 50e9 (50 GB/s)")
    raise SpecError(message, field=name)


def stack_form_values(request: Mapping[str, Any]) -> dict[str, Any]:
    """The group's part of the form for a request made earlier."""
    values: dict[str, Any] = {}
    for spec in STACK_FIELDS:
        value = request.get(spec.name)
        if isinstance(value, bool):
            values[spec.name] = "on" if value else "off"
        elif value is not None:
            values[spec.name] = str(value)
    for name in (*_NUMBERS, "intra_node_topology"):
        if request.get(name) is not None:
            values[name] = str(request[name])
    return values


def is_stack_input(name: str) -> bool:
    """An error on (or a value in) one of these inputs opens the Advanced section."""
    return name in NAMES


def has_values(values: Mapping[str, Any]) -> bool:
    """Whether the form holds a stack or cluster value other than the default."""
    return any(str(values.get(n) or "") not in ("", str(DEFAULTS.get(n, ""))) for n in NAMES)


def context() -> dict[str, Any]:
    """What ``_stack_fields.html`` draws."""
    return {"stack_inputs": STACK_INPUTS, "cluster_inputs": CLUSTER_INPUTS}
