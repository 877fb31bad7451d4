"""Where placed graphs really run: devices in this process, or a TensorFlow cluster.

Runs go through a TF1 Session (tf.compat.v1): it takes a remote target (a cluster's gRPC
address), honours per-node devices, reports per-node step stats, and accepts a per-run timeout.
In-process logical CPUs come from the session's own device_count, so measuring never depends
on how the calling program configured TensorFlow.

Every runtime has a fingerprint: what makes its step times its own (the cluster spec and its
options, the host, its CPU model and core count, its GPU models, TensorFlow's version).
Everything measured is kept under a key that includes it, so a profile made on one runtime is
never served for another that names its devices alike (`local:2` and `local:2,threads=1`,
or one cache shared by two machines).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Optional, Sequence

from tf_placeto.devices import DeviceSet, parse_device
from tf_placeto.errors import InputError
from tf_placeto.measure.runtimes.cluster import Cluster, ExistingCluster
from tf_placeto.measure.runtimes.links import warm_links
from tf_placeto.measure.runtimes.local import LocalCluster
from tf_placeto.measure.runtimes.machine import machine_fingerprint
from tf_placeto.measure.runtimes.spec import local_fingerprint, local_spec


@dataclasses.dataclass
class Runtime:
    device_names: list           # canonical names placements may use
    target: str = ""             # "" in-process, else "grpc://host:port"
    cluster: Optional[Cluster] = None  # to check and restart workers
    num_cpus: int = 1            # in-process CPU devices the session creates
    # seconds of each step that warmed the cluster's links, the latest warm-up's (links.py)
    warmup_steps_s: list = dataclasses.field(default_factory=list)
    # what makes its step times its own (the module's docstring): part of every cache key
    fingerprint: dict = dataclasses.field(default_factory=lambda: in_process_fingerprint())

    @classmethod
    def local(cls, devices: DeviceSet) -> "Runtime":
        cpus = [d.index for d in devices if d.device_type == "CPU" and d.is_local]
        if any(not d.is_local for d in devices):
            raise InputError("devices of another job need a cluster: use --cluster")
        return cls(device_names=devices.names, num_cpus=max(cpus, default=0) + 1)

    @classmethod
    def on_cluster(cls, cluster) -> "Runtime":
        return cls(device_names=list(cluster.device_names), target=cluster.target,
                   cluster=cluster, fingerprint=cluster.fingerprint())

    @property
    def device_types(self) -> list:
        """Distinct device types, in device order."""
        return list(dict.fromkeys(parse_device(n).device_type for n in self.device_names))

    def device_type(self, name: str) -> str:
        return parse_device(name).device_type

    def session_config(self, timeout_s: Optional[float] = None):
        """Strict placement, state isolated per session; on a cluster, every blocking
        operation (session creation too, which a dead worker would hang) bounded by timeout_s."""
        import tensorflow as tf  # heavy: loaded on first use, not with the package

        config = tf.compat.v1.ConfigProto(allow_soft_placement=False,
                                          isolate_session_state=True)
        if self.cluster is not None:
            config.MergeFrom(self.cluster.session_config())
            if timeout_s is not None:
                config.operation_timeout_in_ms = max(1, round(timeout_s * 1000))
        else:
            config.device_count["CPU"] = self.num_cpus
        return config

    def warm_links(self) -> None:
        """Exchange bulk tensors between the cluster's tasks until its links run at their
        warm rate (links.py says why); nothing in this process."""
        self.warmup_steps_s = warm_links(self)

    def restart_dead_workers(self) -> list:
        """Start again the cluster's workers that died, and warm their links; their task
        indices (none for servers someone else runs, or in this process)."""
        restarted = [] if self.cluster is None else self.cluster.restart_dead_workers()
        if restarted:
            self.warm_links()
        return restarted

    def watched(self, call):
        """call(); on a cluster, with its tasks watched meanwhile (Cluster.watched): a worker
        that dies raises WorkerDied within the cluster's `watch_interval_s`."""
        return call() if self.cluster is None else self.cluster.watched(call)

    def describe(self) -> str:
        where = self.target or "this process"
        return f"{len(self.device_names)} devices on {where}: {', '.join(self.device_names)}"


def planned_runtime(devices: Optional[str] = None, cluster: Optional[str] = None) -> tuple:
    """(device names, fingerprint) that open_runtime(devices, cluster) would give (with
    nothing `named`), found without starting a cluster: what a cached answer is looked up
    by."""
    _check_one_of(devices, cluster)
    if cluster:
        return planned_cluster(cluster)
    names = (DeviceSet.parse(devices) if devices else DeviceSet.this_machine()).names
    return names, in_process_fingerprint()


def in_process_fingerprint() -> dict:
    """The fingerprint of devices in this process."""
    return {"runtime": "this process", **machine_fingerprint()}


@contextlib.contextmanager
def open_runtime(devices: Optional[str] = None, cluster: Optional[str] = None,
                 named: Sequence[str] = ()):
    """The runtime a command asked for, closed (workers stopped) when the block ends; a
    cluster's links are warmed first (links.py).

    devices: a device spec (see DeviceSet.parse); cluster: "local:N", a ClusterSpec JSON (text
    or file) or "TF_CONFIG". With neither: this machine's devices plus any local devices that
    `named` (the placements' devices) mention, such as logical CPUs.
    """
    _check_one_of(devices, cluster)
    if cluster:
        with parse_cluster(cluster) as running:
            runtime = Runtime.on_cluster(running)
            runtime.warm_links()
            yield runtime
        return
    if devices:
        yield Runtime.local(DeviceSet.parse(devices))
        return
    here = DeviceSet.this_machine()
    wanted = sorted({here.check(name) for name in named} | set(here.names),
                    key=lambda n: (parse_device(n).device_type, parse_device(n).index))
    yield Runtime.local(DeviceSet.from_strings(wanted))


def _check_one_of(devices: Optional[str], cluster: Optional[str]) -> None:
    if devices and cluster:
        raise InputError("give --devices or --cluster, not both")


def parse_cluster(spec: str) -> Cluster:
    """"local:N" -> LocalCluster(N) (started); "local:N,memory=SIZE" caps each worker's memory,
    "local:N,threads=T" gives each T inter-op threads; anything else names an existing
    cluster."""
    if spec.startswith("local:"):
        workers, memory, threads = local_spec(spec)
        return LocalCluster(workers, memory_limit_bytes=memory, op_threads=threads)
    return ExistingCluster.from_spec(spec)


def planned_cluster(spec: str) -> tuple:
    """(device names, fingerprint) that parse_cluster(spec) would give, without starting or
    asking anyone; the spec is read once."""
    if spec.startswith("local:"):
        workers, memory, threads = local_spec(spec)
        return (Cluster("worker", [""] * workers).device_names,
                local_fingerprint(workers, memory, threads))
    existing = ExistingCluster.from_spec(spec)
    return existing.device_names, existing.fingerprint()

