"""Cluster specs: what `--cluster` names, parsed and checked before anything starts.

"local:N[,memory=SIZE][,threads=T]" asks for N local worker processes (local.py); a JSON object,
a JSON file or "TF_CONFIG" names servers someone else runs (cluster.py). A spec that is
malformed, or asks for more than this machine can start, fails here in one line.
"""

from __future__ import annotations

import json
import os
import re
from typing import Optional

from tf_placeto.devices import memory_amount
from tf_placeto.errors import InputError
from tf_placeto.measure.runtimes import worker
from tf_placeto.measure.runtimes.machine import machine_fingerprint, memory_bytes, usable_cores

_JOB_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# A count in a local spec: ASCII digits (isdigit() also takes "²"), no more than int() reads.
_SPEC_COUNT = re.compile(r"^[0-9]{1,4000}$")
# Inter-op threads of a local worker: they take turns on its one core, and each reserves a
# stack (8 MiB here) that memory=SIZE counts.
MAX_OP_THREADS = 64


class ClusterSpecError(InputError):
    """A cluster spec that is malformed or asks for what this machine cannot start."""


def local_fingerprint(workers: int, memory_limit_bytes: Optional[int], op_threads: int) -> dict:
    """The fingerprint of a LocalCluster with these options (runtime.py)."""
    return {"runtime": "local cluster", "workers": workers, "memory_bytes": memory_limit_bytes,
            "threads": op_threads, **machine_fingerprint()}


def local_spec(spec: str) -> tuple:
    """(workers, memory cap in bytes or None, inter-op threads) of "local:N" with the options
    memory=SIZE and threads=T, within what this machine runs: a worker to each core this
    process may use, a cap within its memory, at most MAX_OP_THREADS threads."""
    count, *options = spec[len("local:"):].split(",")
    if not _SPEC_COUNT.match(count) or int(count) < 1:
        raise ClusterSpecError(f"bad cluster {spec!r}: write local:N with N >= 1 workers "
                               "(local:N,memory=SIZE caps each worker's memory)")
    cores = len(usable_cores())
    if int(count) > cores:
        raise ClusterSpecError(f"bad cluster {spec!r}: at most {cores} local workers here: each "
                               f"runs on a core of its own, and this process may use {cores}; "
                               "for more devices in one process, use --devices N")
    memory, threads = None, worker.OP_THREADS
    for option in options:
        name, _, value = option.partition("=")
        if name == "memory" and value:
            memory = _memory_cap(value, spec)
        elif name == "threads" and _SPEC_COUNT.match(value) and int(value) >= 1:
            threads = int(value)
            if threads > MAX_OP_THREADS:
                raise ClusterSpecError(f"bad cluster {spec!r}: at most {MAX_OP_THREADS} "
                                       "inter-op threads per worker: they take turns on its "
                                       "one core, and each reserves a stack that memory=SIZE "
                                       "counts")
        else:
            raise ClusterSpecError(f"bad cluster {spec!r}: {option!r} is neither memory=SIZE "
                                   "nor threads=T (T >= 1), the options of a local cluster")
    return int(count), memory, threads


def _memory_cap(value: str, spec: str) -> int:
    """memory=SIZE of a local spec, in bytes: positive, and within this machine's memory
    where it can be read (a cap beyond it caps nothing)."""
    number, unit_bytes, _ = memory_amount(value, f"memory cap of cluster {spec!r}")
    cap, machine = int(number * unit_bytes), memory_bytes()
    if machine is not None and cap > machine:
        raise ClusterSpecError(f"memory cap of cluster {spec!r}: {value} is more than this "
                               f"machine has ({machine / 2**30:.1f} GiB)")
    return cap


def existing_jobs(spec: str) -> dict:
    """{"job": ["host:port", ...], ...} of a JSON object, a JSON file or "TF_CONFIG" (that
    variable); a TF_CONFIG-style object ({"cluster": {...}, "task": {...}}) anywhere."""
    return _cluster_jobs(*_read_spec(spec))


def _read_spec(spec: str) -> tuple:
    """(the parsed JSON, where it came from, for messages)."""
    if spec == "TF_CONFIG":
        if not os.environ.get("TF_CONFIG"):
            raise ClusterSpecError("cluster spec TF_CONFIG: the TF_CONFIG variable is not set")
        text, origin = os.environ["TF_CONFIG"], "the TF_CONFIG variable"
    elif spec.lstrip().startswith("{"):
        text, origin = spec, "the cluster spec"
    elif os.path.isfile(spec):
        with open(spec) as file:
            text, origin = file.read(), spec
    else:
        raise ClusterSpecError(f"cluster spec {spec!r} is neither local:N, a JSON object, "
                               "a JSON file nor TF_CONFIG")
    try:
        return json.loads(text), origin
    except json.JSONDecodeError as error:
        raise ClusterSpecError(f"{origin} is not valid JSON: {error}") from None


def _cluster_jobs(parsed, where: str) -> dict:
    """Validate {"job": ["host:port", ...], ...} (or a TF_CONFIG around it); return it."""
    jobs = parsed.get("cluster", parsed) if isinstance(parsed, dict) else parsed
    if not isinstance(jobs, dict) or not jobs:
        raise ClusterSpecError(
            f'{where}: expected an object such as {{"worker": ["host:port", ...]}}')
    for job, addresses in jobs.items():
        if not _JOB_NAME.match(job):
            raise ClusterSpecError(f"{where}: job name {job!r} must be a letter then letters, "
                                   "digits or _")
        if not isinstance(addresses, list) or not addresses:
            raise ClusterSpecError(
                f'{where}: job {job!r} must list its tasks as ["host:port", ...]')
        for address in addresses:
            host, _, port = str(address).rpartition(":")
            if not isinstance(address, str) or not host or not port.isdigit() \
                    or not 0 < int(port) < 65536:
                raise ClusterSpecError(f"{where}: job {job!r} has {address!r}, "
                                       "not an address host:port")
    return jobs
