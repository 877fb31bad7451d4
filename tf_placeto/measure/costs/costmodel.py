"""The cost model: what one graph costs on one runtime, as measured, and its on-disk cache.

Per op and device type: compute time (median over traced runs, then the mean over the ops
that run the same kernel on the same shapes), output bytes, and what more it
takes when an input comes from another device (0 for most kernels). Per ordered
device pair: transfer latency and bandwidth, fitted to timed transfers. Stored as CSV tables
plus a JSON description (open formats, readable by pandas and by people; never pickle), in a
directory named by a key of everything that changes the costs: the graph, the signature's
input shapes (the batch), the devices and the runtime's fingerprint (its cluster spec and
options, host, CPU model and cores, GPU models, TensorFlow's version), so that two runtimes
that name their devices alike never share figures. The description records each table's
sha256 and rows; every file is checked as it is read, and a damaged entry is named in one
line and profiled again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import os
import time
from typing import Optional

import numpy as np
import pandas as pd

from tf_placeto.cache import cache_dir, entry_lock
from tf_placeto.devices import parse_device
from tf_placeto.errors import InputError, first_line
from tf_placeto.files import write_atomically
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.sources import signature_inputs
from tf_placeto.measure.costs.calibration import CALIBRATION_FILE, Calibration

log = logging.getLogger(__name__)
OPS_FILE, LINKS_FILE, META_FILE = "ops.csv", "links.csv", "profile.json"
LINK_COLUMNS = ["src", "dst", "latency_us", "bytes_per_us", "copy_share"]
OP_COLUMNS = ["op", "device_type", "compute_us", "output_bytes", "traced"]   # at least
# Columns that must hold finite numbers where a table has them. A link's bandwidth must be
# above 0 and may be infinite: a link faster than its timed transfers could tell (check_links).
OP_NUMBERS = ["compute_us", "output_bytes", "executions", "remote_extra_us"]
LINK_NUMBERS = ["latency_us", "copy_share"]
# What reading a damaged cached file raises (a truncated or overwritten file, fields of
# another shape).
UNREADABLE = (OSError, ValueError, TypeError, KeyError, AttributeError)
# Bump when profiling measures something new or differently: older cached profiles are redone.
PROFILER_VERSION = 10  # 10: ops of one kernel signature share their mean traced time


def graph_fingerprint(graph: OpGraph) -> str:
    """A hash of the source graph and signature, devices left out: the same model gives the
    same fingerprint, and so does a placed copy of it (profiling runs it on one device)."""
    source = graph.source
    unplaced = type(source.graph_def)()
    unplaced.CopyFrom(source.graph_def)
    for node in unplaced.node:
        node.device = ""
    for function in unplaced.library.function:
        for node in function.node_def:
            node.device = ""
    digest = hashlib.sha256(unplaced.SerializeToString(deterministic=True))
    digest.update(str(source.signature).encode())
    return digest.hexdigest()


def input_shapes(graph: OpGraph) -> dict:
    return {key: [d.size for d in shape.dim]
            for key, (_, _, shape) in sorted(signature_inputs(graph.source).items())}


def profile_key(graph: OpGraph, device_names, fingerprint: dict) -> tuple:
    """(key, what it was made of): the cache is valid exactly while all of these hold.
    fingerprint: the runtime's (Runtime.fingerprint; planned_runtime's for a lookup that
    starts nothing), which names its cluster spec and options, host, CPU, cores, GPUs and
    TensorFlow's version: runtimes that name their devices alike get keys of their own."""
    parts = {
        "graph": graph_fingerprint(graph),
        "inputs": input_shapes(graph),
        "devices": list(device_names),
        "device_types": sorted({parse_device(d).device_type for d in device_names}),
        "runtime": dict(fingerprint),
        "profiler": PROFILER_VERSION,
    }
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]
    return key, parts


def profile_directory(key: str, cache: Optional[str] = None) -> str:
    """Where the profile of `key` (profile_key) is kept, with everything else measured of its
    graph on its runtime: its calibration, the real runs (tf_placeto.measure.profiling.fitting), their
    results and journals, TensorFlow's messages."""
    return os.path.join(cache or cache_dir("profiles"), key)


def graph_profile_directory(graph: OpGraph, device_names, fingerprint: dict,
                            cache: Optional[str] = None) -> str:
    """profile_directory of `graph` on these devices of the runtime of `fingerprint`."""
    return profile_directory(profile_key(graph, device_names, fingerprint)[0], cache)


LINK_PRESETS = {"k80": "machine:25:7600"}    # Placeto's paper: K80 GPUs of one server


@dataclasses.dataclass(frozen=True)
class Link:
    """One link between two devices: latency + bytes / bandwidth, a copy share at each end.

    one_machine: the devices it joins are devices of one machine (the GPUs of one server, as in
    Placeto's paper), not tasks of a cluster: a step then pays no RunGraph call per task and no
    RPC per crossing tensor, the costs that the calibration fits on a cluster's workers."""

    latency_us: float
    bytes_per_us: float
    copy_share: float = 0.0
    one_machine: bool = False

    @classmethod
    def parse(cls, text: str) -> "Link":
        """"[machine:]LATENCY_US:BYTES_PER_US[:COPY_SHARE]", e.g. "25:7600" (tasks of a
        cluster joined by Placeto's K80 links), "machine:25:7600" or "k80" (K80 GPUs of one
        machine)."""
        spec = LINK_PRESETS.get(text.strip().lower(), text.strip())
        one_machine = spec.startswith("machine:")
        try:
            values = [float(v) for v in spec.removeprefix("machine:").split(":")]
            link = cls(*values) if len(values) <= 3 else None
        except (ValueError, TypeError):
            link = None
        if link is None:
            raise InputError(f"link {text!r}: write [machine:]LATENCY_US:BYTES_PER_US"
                             "[:COPY_SHARE], e.g. 25:7600, or k80")
        if link.latency_us < 0 or link.bytes_per_us <= 0 or not 0 <= link.copy_share <= 0.5:
            raise InputError(f"link {text!r}: latency >= 0, bandwidth > 0, copy share in "
                             "[0, 0.5]")
        return dataclasses.replace(link, one_machine=one_machine)


@dataclasses.dataclass
class CostModel:
    ops: pd.DataFrame      # op, device_type, compute_us, output_bytes, traced, executions,
    #                        remote_extra_us
    links: pd.DataFrame    # src, dst, latency_us, bytes_per_us, copy_share
    meta: dict
    calibration: Optional[Calibration] = None   # fitted to real runs of placements

    @property
    def device_types(self) -> list:
        return sorted(self.ops["device_type"].unique())

    def compute_us(self, graph: OpGraph, device_types) -> np.ndarray:
        """(n_ops, n_types) compute times; ops that never ran on their own (folded or fused
        away by Grappler) cost 0, their time being in the op they were folded into."""
        return self._per_op(graph, device_types, "compute_us")

    def remote_extra_us(self, graph: OpGraph, device_types) -> np.ndarray:
        """(n_ops, n_types): what an op takes beyond compute_us when one of its inputs comes
        from another device (0 where the profile found no difference, or did not look)."""
        if "remote_extra_us" not in self.ops:
            return np.zeros((len(graph.ops), len(device_types)))
        return self._per_op(graph, device_types, "remote_extra_us")

    def executions(self, graph: OpGraph) -> np.ndarray:
        """(n_ops,): how many times each op ran in one profiled step (a loop's iterations);
        1 where the profile did not count."""
        if "executions" not in self.ops:
            return np.ones(len(graph.ops))
        counts = self.ops.groupby("op")["executions"].max()
        return counts.reindex([op.name for op in graph.ops]).fillna(1).clip(lower=1).to_numpy()

    def _per_op(self, graph: OpGraph, device_types, column: str) -> np.ndarray:
        table = self.ops.pivot_table(index="op", columns="device_type", values=column)
        names = [op.name for op in graph.ops]
        missing = [t for t in device_types if t not in table.columns]
        if missing:
            raise ValueError(f"the profile has no costs for device type(s) {missing}; "
                             f"profiled: {list(table.columns)}")
        return table.reindex(index=names, columns=list(device_types)).fillna(0.0).to_numpy()

    def op_overhead_us(self, device_type: str) -> float:
        """What a real step spends per op beyond the traced kernel times (executor, scheduling).

        From the profile's own untraced single-device steps: (step - sum of op times) spread
        over the ops that ran. 0 for profiles that did not time untraced steps.
        """
        step = self.meta.get("step_us", {}).get(device_type)
        if step is None:
            return 0.0
        ran = self.ops[(self.ops["device_type"] == device_type) & self.ops["traced"]]
        return max(0.0, (step - ran["compute_us"].sum()) / max(len(ran), 1))

    def link_arrays(self, device_names) -> tuple:
        """(latency_us, bytes_per_us, copy_share) matrices over `device_names`; a device to
        itself is free. copy_share: the part of bytes / bandwidth that each end's processor
        spends copying (0 where the profile did not measure it)."""
        n = len(device_names)
        latency, share = np.zeros((n, n)), np.zeros((n, n))
        bandwidth = np.full((n, n), np.inf)
        links = self.links.assign(copy_share=self._copy_shares())
        fitted = {(r.src, r.dst): (r.latency_us, r.bytes_per_us, r.copy_share)
                  for r in links.itertuples()}
        for i, a in enumerate(device_names):
            for j, b in enumerate(device_names):
                if i == j:
                    continue
                if (a, b) not in fitted:
                    raise ValueError(f"the profile has no link measurement from {a} to {b}")
                latency[i, j], bandwidth[i, j], share[i, j] = fitted[(a, b)]
        return latency, bandwidth, share

    def _copy_shares(self) -> pd.Series:
        if "copy_share" in self.links:
            return self.links["copy_share"].fillna(0.0)
        return pd.Series(0.0, index=self.links.index)

    def with_more_devices(self, count: int, link: Optional["Link"] = None) -> tuple:
        """(device names, cost model) for `count` simulated devices like the profiled ones.

        The simulated machine is the profiled one with more of the same devices: the same per-op
        costs, and for every pair of devices the median of the links that were measured, or
        `link` to ask what other links would do. Names follow the profiled ones: tasks of the
        same job on a cluster, /device:TYPE:k locally; devices of the first task for a link
        within one machine, which leaves out what the calibration fitted to a cluster's tasks
        and RPCs (and the profile's cost of a remote input), keeping its op-time scale.
        """
        if count < 1:
            raise ValueError(f"a device count must be at least 1, not {count}")
        profiled = [parse_device(name) for name in self.meta.get("devices", [])]
        if not profiled:
            raise ValueError("the profile does not name the devices it was made on")
        if count > 1 and self.links.empty and link is None:
            raise ValueError("the profile measured no link (it was made on one device): profile "
                             "on at least two devices to simulate several")
        first = profiled[0]
        one_machine = first.is_local or (link is not None and link.one_machine)
        names = [dataclasses.replace(first, index=k).name if one_machine
                 else dataclasses.replace(first, task=k, index=0).name for k in range(count)]
        calibration, ops = self.calibration, self.ops
        if calibration is not None and link is not None:     # the link asked about, as given
            calibration = dataclasses.replace(calibration, latency_us=None, bytes_per_us=None,
                                              copy_share=None)
        if link is not None and link.one_machine:
            ops = ops.drop(columns="remote_extra_us", errors="ignore")
            if calibration is not None:
                calibration = dataclasses.replace(calibration, remote_task_us=0.0, copy_us=0.0,
                                                  iteration_us=0.0, message_us=0.0)
        if link is None and count > 1:
            link = Link(float(self.links["latency_us"].median()),
                        float(self.links["bytes_per_us"].median()),
                        float(self._copy_shares().median()))
        pair = dataclasses.asdict(link) if link is not None else {}
        links = pd.DataFrame([{"src": a, "dst": b, **pair} for a in names for b in names if a != b],
                             columns=LINK_COLUMNS)
        meta = {**self.meta, "simulated_devices": names, "simulated_link": pair}
        return names, CostModel(ops=ops, links=links, meta=meta, calibration=calibration)

    def save(self, directory: str) -> None:
        """Write the tables, then META_FILE with their records (write_table): each file whole
        and private (files.write_atomically), and META_FILE, which makes the directory a cache
        hit, last, so that a run killed while saving leaves no hit. The directory may hold
        other files (the measurements' logs). The caller holds the entry's lock."""
        meta_path = os.path.join(directory, META_FILE)
        with contextlib.suppress(FileNotFoundError):
            os.remove(meta_path)          # no hit while the tables are being replaced
        tables = {OPS_FILE: write_table(os.path.join(directory, OPS_FILE), self.ops),
                  LINKS_FILE: write_table(os.path.join(directory, LINKS_FILE), self.links)}
        if self.calibration is not None:
            self.calibration.save(directory)
        meta = {**self.meta, "tables": tables}
        write_atomically(meta_path, lambda file: json.dump(meta, file, indent=1, sort_keys=True),
                         private=True)

    @classmethod
    def load(cls, directory: str) -> Optional["CostModel"]:
        """The profile stored in `directory`, or None when there is none: no META_FILE (it is
        written last, so a profile cut short while saving has none). A damaged entry (a table
        that does not match its record in META_FILE or does not hold its columns and numbers,
        links that miss a pair of the profile's devices, a META_FILE that does not parse) is
        read again under the entry's lock, since another process may have been saving it; if
        it is still damaged, it is named in one line and its tables and calibration removed,
        so that it is profiled again. The logs of real runs stay, to fit it again."""
        try:
            return cls._read(directory)
        except UNREADABLE:
            pass
        with entry_lock(directory, "the profile another process is saving"):
            try:
                return cls._read(directory)
            except UNREADABLE as error:
                log.warning(f"the cached profile at {directory} is damaged "
                            f"({first_line(error)}); profiling again")
                for name in (META_FILE, OPS_FILE, LINKS_FILE, CALIBRATION_FILE):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(os.path.join(directory, name))
        return None

    @classmethod
    def _read(cls, directory: str) -> Optional["CostModel"]:
        """The profile in `directory` (None without META_FILE), checked: UNREADABLE if not."""
        try:
            with open(os.path.join(directory, META_FILE), encoding="utf-8") as f:
                meta = json.load(f)
        except FileNotFoundError:
            return None
        except ValueError as error:
            raise ValueError(f"{META_FILE} does not parse: {first_line(error)}") from None
        if not isinstance(meta, dict):
            raise ValueError(f"{META_FILE} holds no object")
        tables = meta["tables"]
        ops = read_table(os.path.join(directory, OPS_FILE), OP_COLUMNS, OP_NUMBERS,
                         tables[OPS_FILE], keep_default_na=False)
        links = read_table(os.path.join(directory, LINKS_FILE), LINK_COLUMNS[:4], LINK_NUMBERS,
                           tables[LINKS_FILE])
        check_links(links, meta["devices"])
        return cls(ops=ops, links=links, meta=meta, calibration=Calibration.load(directory))

    def summary(self) -> dict:
        per_type = self.ops.groupby("device_type")["compute_us"].sum()
        return {
            "key": self.meta.get("key"),
            "ops": int(self.ops["op"].nunique()),
            "traced_ops": int(self.ops["traced"].sum()),
            "compute_ms_per_device_type": {t: float(v) / 1000 for t, v in per_type.items()},
            "links": self.links.to_dict(orient="records"),
            "remote_input_slowdowns": self.meta.get("remote_inputs", {}).get("slowdowns", {}),
            "profiled_at": self.meta.get("created"),
            "calibration": self.calibration.to_json() if self.calibration else None,
        }


def write_table(path: str, table: pd.DataFrame) -> dict:
    """Write `table` as CSV, whole and private (files.write_atomically); its record, which
    read_table checks the file against: its sha256 and rows."""
    text = table.to_csv(index=False)
    write_atomically(path, lambda file: file.write(text), private=True)
    return {"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "rows": len(table)}


def read_table(path: str, columns, numbers, record: dict, **options) -> pd.DataFrame:
    """The CSV table at `path` as write_table wrote it (`record`), with `columns` and finite
    `numbers` (those of them it has); ValueError (or OSError) when it is not, as after a
    write cut short or a file overwritten."""
    name = os.path.basename(path)
    with open(path, "rb") as file:
        data = file.read()
    if hashlib.sha256(data).hexdigest() != record["sha256"]:
        raise ValueError(f"{name} is not the file that was written (cut short or changed)")
    table = pd.read_csv(io.BytesIO(data), **options)
    if len(table) != record["rows"]:
        raise ValueError(f"{name} has {len(table)} rows of {record['rows']}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}")
    for column in [c for c in numbers if c in table.columns]:
        if not np.isfinite(pd.to_numeric(table[column], errors="coerce")).all():
            raise ValueError(f"{name} has a {column} that is not a finite number")
    return table


def check_links(links: pd.DataFrame, device_names) -> None:
    """ValueError unless `links` has a positive bandwidth on every row and a link for every
    ordered pair of `device_names` (a table cut short at a line's end lacks some)."""
    if not (pd.to_numeric(links["bytes_per_us"], errors="coerce") > 0).all():
        raise ValueError("a link's bandwidth is not a positive number")
    measured = set(zip(links["src"], links["dst"]))
    for a, b in itertools.permutations(device_names, 2):
        if (a, b) not in measured:
            raise ValueError(f"no link measurement from {a} to {b}")


def new_meta(key: str, parts: dict, **extra) -> dict:
    return {"key": key, **parts, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **extra}
