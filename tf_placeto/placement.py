"""A placement: op name -> device, checked against the graph's hard rules before any write.

The JSON form is one object mapping op names (as `inspect --json` lists them) to TensorFlow
device strings. Ops not named keep the device they had, except that a colocation group follows
any of its named members (TensorFlow would refuse the graph otherwise).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from tf_placeto.devices import DeviceSet
from tf_placeto.errors import DeviceError, PlacementError
from tf_placeto.files import write_atomically
from tf_placeto.graph.colocation import ColocationSets, colocation_sets
from tf_placeto.graph.kernels import kernel_device_types
from tf_placeto.graph.op_graph import OpGraph

_LISTED = 5
# A placement names each op once, in about 100 bytes: this holds millions of ops, more than
# any graph has. A bigger file (or an endless one, /dev/zero) is not read to the end.
MAX_FILE_BYTES = 256 * 2**20
# A JSON string, or one left open to the end: every quote starts a match, so that taking
# the strings out of a text takes one pass over it.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)', re.DOTALL)
_NON_BRACKETS = re.compile(r"[^\[\]{}]+")
_OPENED_IN_OPENED = re.compile(r"[\[{][\[{]")


class Placement(Mapping):
    """An immutable op name -> canonical device string mapping."""

    def __init__(self, mapping: Mapping):
        self._devices = dict(mapping)

    def __getitem__(self, name):
        return self._devices[name]

    def __iter__(self):
        return iter(self._devices)

    def __len__(self):
        return len(self._devices)

    def __repr__(self) -> str:
        used = sorted(set(self._devices.values()))
        return f"Placement({len(self)} ops on {', '.join(used) or 'no device'})"

    @classmethod
    def from_json(cls, path: str) -> "Placement":
        """The placement in a JSON file. JSON that nests (an object or array inside another)
        is no placement, and is refused before it is parsed: however deep it goes, parsing
        never recurses."""
        text = _read_text(path)
        try:
            data = None if _nests(text) else json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlacementError(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(data, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise PlacementError(f"{path}: a placement is a JSON object mapping op names to "
                                 'device strings, e.g. {"dense/MatMul": "/device:CPU:1"}')
        return cls(data)

    def to_json(self, path: str) -> str:
        """Write the placement to `path` whole (files.write_atomically)."""
        return write_atomically(path, lambda file: file.write(
            json.dumps(self._devices, indent=1, sort_keys=True) + "\n"))

    def validate(self, graph: OpGraph, devices: DeviceSet,
                 colocation: ColocationSets | None = None) -> "Placement":
        """The placement as it will be written: canonical devices, colocation groups whole.

        Raises PlacementError naming the first few problems: unknown ops, unknown devices,
        a colocation group asked to split, an op sent where it has no kernel.
        """
        unknown = [name for name in self._devices if name not in graph]
        if unknown:
            raise PlacementError(
                f"{len(unknown)} op name(s) not in the graph: {_listed(unknown)} "
                "(names are those of `tf-placeto inspect --json`)")
        canonical = {}
        for name, text in self._devices.items():
            try:
                canonical[name] = devices.check(text)
            except DeviceError as exc:
                raise PlacementError(f"op {name!r}: {exc}") from exc
        colocation = colocation or colocation_sets(graph)
        full = {}
        for set_id, members in enumerate(colocation.members):
            named = {graph.ops[i].name: canonical[graph.ops[i].name]
                     for i in members if graph.ops[i].name in canonical}
            if not named:
                continue
            if len(set(named.values())) > 1:
                pairs = sorted(named.items(), key=lambda kv: kv[1])
                (a, da), (b, db) = pairs[0], pairs[-1]
                raise PlacementError(
                    f"ops {a!r} ({da}) and {b!r} ({db}) are in one colocation group "
                    f"({', '.join(colocation.reasons[set_id])}) and must share a device")
            device = next(iter(named.values()))
            allowed = colocation.device_types[set_id]
            device_type = device.split("device:")[-1].split(":")[0]
            if allowed is not None and device_type not in allowed:
                culprit = _first_without_kernel(graph, members, device_type)
                raise PlacementError(
                    f"op {culprit!r} has no {device_type} kernel, so its colocation group "
                    f"cannot go to {device} (kernels for: {', '.join(sorted(allowed)) or 'none'})")
            for i in members:
                full[graph.ops[i].name] = device
        return Placement(full)


def _read_text(path: str) -> str:
    """A placement file's text, read no further than MAX_FILE_BYTES."""
    if os.path.exists(path) and not (os.path.isfile(path) or os.path.isdir(path)):
        raise PlacementError(f"{path}: not a file (a pipe, socket or device), whose reading "
                             "could wait for ever")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError as exc:
        raise PlacementError(f"{path}: no such placement file") from exc
    except OSError as exc:
        raise PlacementError(f"{path}: cannot read the placement ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise PlacementError(f"{path}: not valid JSON ({exc})") from exc
    if len(text) > MAX_FILE_BYTES:
        raise PlacementError(f"{path}: more than {MAX_FILE_BYTES // 2**20} MiB, more than the "
                             "placement of any graph (about 100 bytes per op)")
    return text


def _nests(text: str) -> bool:
    """Whether JSON `text` opens an object or array inside another: its brackets outside
    strings, with two openings in a row."""
    brackets = _NON_BRACKETS.sub("", _JSON_STRING.sub("", text))
    return _OPENED_IN_OPENED.search(brackets) is not None


def _first_without_kernel(graph: OpGraph, members, device_type: str) -> str:
    for i in members:
        types = kernel_device_types(graph.ops[i].node_def)
        if types is not None and device_type not in types:
            return graph.ops[i].name
    return graph.ops[members[0]].name


def _listed(names) -> str:
    shown = ", ".join(repr(n) for n in names[:_LISTED])
    return shown + (f" and {len(names) - _LISTED} more" if len(names) > _LISTED else "")
