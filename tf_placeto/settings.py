"""What a call asks for besides its source: where the step runs (`Target`) and how the placers
search (`Search`). Small value objects, checked when made, so that `place`, `profile`,
`measure_steps`, `compare` and the pipeline take a handful of arguments and bad input is
refused before any runtime starts.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Mapping, Optional, Sequence

from tf_placeto import methods
from tf_placeto.errors import InputError
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS
from tf_placeto.measure.runtimes.runtime import open_runtime, planned_runtime
from tf_placeto.placers.problem import objective_and_in_flight
from tf_placeto.workload import MemoryLimit


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the step is profiled and run, and what that place allows.

    devices: devices in this process, a count (of GPUs, else logical CPUs) or comma-separated
    names. cluster: "local:N[,memory=SIZE][,threads=T]", a ClusterSpec JSON (text or file) or
    "TF_CONFIG". Neither: this machine's devices. memory_per_device: each device's limit, bytes
    ("2GiB") or a fraction of the graph's single-device peak ("0.6"). cache: where the
    profiles made there and their results are kept (default $TF_PLACETO_CACHE/profiles).
    """

    devices: Optional[str] = None
    cluster: Optional[str] = None
    memory_per_device: Optional[str] = None
    cache: Optional[str] = None

    def __post_init__(self):
        MemoryLimit.parse(self.memory_per_device)        # refused here, before any work

    @property
    def memory(self) -> Optional[MemoryLimit]:
        return MemoryLimit.parse(self.memory_per_device)

    def or_cluster(self, spec: str) -> "Target":
        """This target, or with neither devices nor a cluster, the cluster `spec` (compare and
        train default to worker processes, whose steps are timed apart from this one)."""
        if self.devices or self.cluster:
            return self
        return dataclasses.replace(self, cluster=spec)

    def planned(self) -> tuple:
        """(device names, fingerprint) that `open` would give, without starting anything:
        what a cached profile is looked up by."""
        return planned_runtime(self.devices, self.cluster)

    @contextlib.contextmanager
    def open(self, named: Sequence[str] = ()):
        """The runtime (tf_placeto.measure.runtimes.runtime.Runtime), its workers stopped when
        the block ends; this machine's devices include the local ones `named` mentions."""
        with open_runtime(self.devices, self.cluster, named=named) as runtime:
            yield runtime


@dataclasses.dataclass(frozen=True)
class Search:
    """How the placers look for a placement.

    max_groups: the ops are placed in at most this many colocation-safe groups. seed: of the
    randomised methods. objective: "latency" (one step as short as possible) or "throughput"
    (the most steps per second with `stream` steps in flight, default 4, as a server with
    concurrent requests). options: the placers' own, by their names in
    tf_placeto.methods.options() (for placeto: policy, budget, start, passes).
    """

    max_groups: int = DEFAULT_MAX_GROUPS
    seed: int = 0
    objective: str = "latency"
    stream: Optional[int] = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if isinstance(self.max_groups, bool) or not isinstance(self.max_groups, int) \
                or self.max_groups < 1:
            raise InputError(f"max_groups must be a whole number of at least 1, not "
                             f"{self.max_groups!r}")
        objective_and_in_flight(self.objective, self.stream)
        methods.check_options(dict(self.options))

    @property
    def in_flight(self) -> int:
        """Steps in flight under the throughput objective (IN_FLIGHT unless `stream`)."""
        return objective_and_in_flight(self.objective, self.stream)[1]
