"""A workload: one graph, its groups and its profile, ready for placers.

Every surface that places a graph (compare, place, show, optimize) takes the same steps:
import, group, profile on a runtime (cached on disk), then state the placement problem for
some devices under some memory limit. They are done here, once, in that order.

Simulated devices are "more of the profiled ones": a profile made on two workers of a local
cluster describes eight such workers with the same per-op costs and the measured link.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from tf_placeto import methods
from tf_placeto.devices import DeviceSet, memory_amount
from tf_placeto.examples import registry
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS, GroupGraph, group_ops
from tf_placeto.graph.importer import import_source
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.sources import Source
from tf_placeto.measure.costs.costmodel import CostModel
from tf_placeto.measure.profiling.profiler import profile
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.run import PlacerResult


@dataclasses.dataclass(frozen=True)
class MemoryLimit:
    """Memory per device: absolute bytes, or a fraction of the graph's single-device peak."""

    bytes: Optional[float] = None
    fraction: Optional[float] = None

    @classmethod
    def parse(cls, text: Optional[str]) -> Optional["MemoryLimit"]:
        """"2GiB", "500MB", "123456789" (bytes) or "0.6" (a fraction, at most 1)."""
        if text is None:
            return None
        value, unit_bytes, unit = memory_amount(
            text, "memory per device", or_else=", or a fraction of the graph's footprint (0.6)")
        if not unit and value <= 1:
            return cls(fraction=value)
        return cls(bytes=value * unit_bytes)

    def bytes_for(self, footprint_bytes: float) -> float:
        return self.bytes if self.bytes is not None else self.fraction * footprint_bytes

    def describe(self) -> str:
        if self.bytes is not None:
            return f"{self.bytes / 2**20:.0f} MiB per device"
        return f"{self.fraction:g} x the single-device peak per device"


@dataclasses.dataclass
class Workload:
    name: str                 # as the user named it: examples:NAME or a path
    graph: OpGraph
    groups: GroupGraph
    cost_model: CostModel
    profile_dir: str
    profile_cached: bool
    expert_layers: tuple = ()  # the human expert's (op-name regex, layer) rules, if known

    def decide(self, method: str, problem: PlacementProblem, seed: int = 0,
               options: Optional[dict] = None) -> PlacerResult:
        """methods.decide with what this workload knows beyond the problem: the expert's
        layers. options: placer options by their surface names (methods.options())."""
        return methods.decide(method, problem, seed=seed, given=options,
                              facts={"layers": self.expert_layers})

    @property
    def profiled_devices(self) -> list:
        return list(self.cost_model.meta["devices"])

    def problem(self, n_devices: Optional[int] = None, memory: Optional[MemoryLimit] = None,
                link=None) -> PlacementProblem:
        """The placement problem on the profiled devices, or on `n_devices` simulated ones
        (linked by `link`, a tf_placeto.measure.costs.costmodel.Link, instead of the measured links
        if given)."""
        if n_devices is None and link is None:
            names, model = self.profiled_devices, self.cost_model
        else:
            names, model = self.cost_model.with_more_devices(
                n_devices or len(self.profiled_devices), link)
        devices = DeviceSet.from_strings(names)
        problem = PlacementProblem.build(self.groups, model, devices)
        if memory is not None:
            limit = memory.bytes_for(problem.single_device_peak_bytes)
            problem = problem.with_capacity(np.full(problem.n_devices, limit))
        return problem


def load_workload(source, runtime, *, max_groups: int = DEFAULT_MAX_GROUPS,
                  cache: Optional[str] = None) -> Workload:
    """Import, group and profile `source` (a path, or a graph.sources.Source naming its
    signature and tag set) on `runtime` (a tf_placeto.measure.runtimes.runtime.Runtime)."""
    graph = import_source(source)
    groups = group_ops(graph, max_groups=max_groups)
    profiled = profile(graph, runtime, cache=cache)
    return Workload(name=str(source), graph=graph, groups=groups, cost_model=profiled.model,
                    profile_dir=profiled.directory, profile_cached=profiled.cached,
                    expert_layers=_expert_layers(source))


def _expert_layers(source) -> tuple:
    """The bundled examples know their layers (tf_placeto.examples.registry); other graphs:
    none."""
    model = Source.of(source).model
    if isinstance(model, str) and model.startswith("examples:"):
        return registry.get(model[len("examples:"):]).expert_layers
    return ()
