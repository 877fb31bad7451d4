"""Device sets: which devices a placement may use, with one canonical string per device.

A device is named as TensorFlow names it. Local devices are written `/device:TYPE:N` (valid
in any job, so a placed graph runs wherever it is loaded); devices of other jobs keep the full
`/job:NAME/replica:R/task:T/device:TYPE:N`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Iterable, Optional, Sequence

from tf_placeto.errors import DeviceError, InputError

_LOCAL_JOBS = (None, "localhost")
_INTEGER = re.compile(r"^\d{1,4000}$")       # int() refuses more than 4,300 digits
_BYTE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
               "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_AMOUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
# What a byte count holds in TensorFlow and in the kernel's limits (64-bit): an amount beyond
# it (1e999GB reads as infinity) is no amount of memory.
MAX_BYTES = 2**63 - 1
# Logical CPUs of one process. TensorFlow makes any number (65,536 took 2.5 s and 285 MiB at
# session start here, so /device:CPU:2147483647 asks for terabytes), but they share the
# process's cores and thread pools: more add no parallelism, and a profile times the link of
# every pair (256 devices: 32,640 pairs, about 0.6 s each here).
MAX_LOGICAL_CPUS = 256
_LOGICAL_CPUS = (f"at most {MAX_LOGICAL_CPUS} logical CPUs in one process (/device:CPU:0 to "
                 f"/device:CPU:{MAX_LOGICAL_CPUS - 1}): they all share its cores, and profiling "
                 "times the link of every pair")


def memory_amount(text: str, what: str, or_else: str = "") -> tuple:
    """(number, bytes per unit, the unit as written) of "2GiB", "500MB" or "123456789"; an
    InputError that names `what` (and `or_else`, what else it may be) for anything else, or
    for an amount that is not positive or beyond MAX_BYTES."""
    match = _AMOUNT.match(str(text))
    unit = match.group(2) if match else None
    if not match or unit.upper() not in _BYTE_UNITS:
        raise InputError(f"{what} {text!r}: give bytes, e.g. 2GiB, 500MB or "
                         f"123456789{or_else}")
    value = float(match.group(1))
    if value <= 0:
        raise InputError(f"{what} {text!r} must be positive")
    if not math.isfinite(value) or value * _BYTE_UNITS[unit.upper()] > MAX_BYTES:
        raise InputError(f"{what} {text!r} is more than any memory: at most "
                         f"{MAX_BYTES / 2**60:.0f} EiB (a 64-bit count of bytes)")
    return value, _BYTE_UNITS[unit.upper()], unit


@dataclasses.dataclass(frozen=True, order=True)
class Device:
    job: str
    replica: int
    task: int
    device_type: str
    index: int

    @property
    def is_local(self) -> bool:
        return self.job == "localhost" and self.replica == 0 and self.task == 0

    @property
    def task_name(self) -> str:
        """The process the device belongs to: /job:J/replica:R/task:T."""
        return f"/job:{self.job}/replica:{self.replica}/task:{self.task}"

    @property
    def name(self) -> str:
        if self.is_local:
            return f"/device:{self.device_type}:{self.index}"
        return (f"/job:{self.job}/replica:{self.replica}/task:{self.task}"
                f"/device:{self.device_type}:{self.index}")

    def __str__(self) -> str:
        return self.name


def parse_device(text: str) -> Device:
    """One TensorFlow device string -> Device; it must name one device (type and index)."""
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    if not isinstance(text, str) or not text.strip():
        raise DeviceError(f"{text!r} is not a device name")
    spec_text = text.strip()
    if not spec_text.startswith("/"):
        spec_text = "/device:" + spec_text if ":" in spec_text and "/" not in spec_text \
            else "/" + spec_text
    try:
        spec = tf.DeviceSpec.from_string(spec_text)
    except (ValueError, TypeError) as exc:
        raise DeviceError(f"{text!r} is not a TensorFlow device name ({exc})") from exc
    if spec.device_type is None or spec.device_index is None:
        raise DeviceError(f"{text!r} does not name one device: give a type and an index, "
                          "e.g. /device:GPU:0 or /job:worker/task:1/device:CPU:0")
    if not 0 <= spec.device_index < 2**31 or not 0 <= (spec.task or 0) < 2**31 \
            or not 0 <= (spec.replica or 0) < 2**31:
        raise DeviceError(f"{text!r} has an index TensorFlow cannot use")
    if spec.job not in _LOCAL_JOBS and spec.task is None:
        raise DeviceError(f"{text!r} names job {spec.job!r} but no task")
    return Device(job=spec.job or "localhost", replica=spec.replica or 0,
                  task=spec.task or 0, device_type=spec.device_type.upper(),
                  index=spec.device_index)


def canonical_device(text: str) -> str:
    return parse_device(text).name


class DeviceSet:
    """An ordered set of devices a placement may use.

    `DeviceSet.this_machine()` is open-ended for CPUs: TensorFlow can split the CPU into any
    number of logical devices (tf.config.set_logical_device_configuration), so /device:CPU:k
    exists for every k below MAX_LOGICAL_CPUS once the program asks for it. GPUs exist as far
    as they are present.
    """

    def __init__(self, devices: Iterable[Device], open_cpu: bool = False,
                 description: Optional[str] = None):
        self.devices = tuple(dict.fromkeys(devices))
        self.open_cpu = open_cpu
        self._names = {d.name: d for d in self.devices}
        self._description = description

    @classmethod
    def this_machine(cls) -> "DeviceSet":
        """This machine's GPUs (logical ones, where a GPU is split), and a splittable CPU."""
        devices = [Device("localhost", 0, 0, "CPU", 0)]
        devices += [Device("localhost", 0, 0, "GPU", i) for i in range(_logical_gpu_count())]
        return cls(devices, open_cpu=True)

    @classmethod
    def local(cls, count: int) -> "DeviceSet":
        """`count` devices of the local accelerator type: GPUs if present, else logical CPUs."""
        if count < 1:
            raise DeviceError(f"a device count must be at least 1, not {count}")
        gpus = _logical_gpu_count()
        if gpus:
            if count > gpus:
                raise DeviceError(f"{count} GPUs asked for, but this machine has {gpus}: "
                                  + ", ".join(f"/device:GPU:{i}" for i in range(gpus)))
            return cls([Device("localhost", 0, 0, "GPU", i) for i in range(count)])
        if count > MAX_LOGICAL_CPUS:
            raise DeviceError(f"{count} logical CPU devices asked for: {_LOGICAL_CPUS}")
        return cls([Device("localhost", 0, 0, "CPU", i) for i in range(count)],
                   description=f"{count} logical CPU devices")

    @classmethod
    def from_strings(cls, names: Sequence[str]) -> "DeviceSet":
        """Explicit device names; local ones must exist on this machine."""
        here = cls.this_machine()
        devices = []
        for name in names:
            device = parse_device(name)
            if device.is_local:
                here.check(device.name)
            devices.append(device)
        if not devices:
            raise DeviceError("an empty device list")
        return cls(devices)

    @classmethod
    def parse(cls, spec: Optional[str]) -> "DeviceSet":
        """A command-line device spec: None (this machine), a count, or comma-separated names."""
        if spec is None or spec.strip() in ("", "local"):
            return cls.this_machine()
        if _INTEGER.match(spec.strip()):
            return cls.local(int(spec))
        return cls.from_strings([s for s in spec.split(",") if s.strip()])

    def __iter__(self):
        return iter(self.devices)

    def __len__(self) -> int:
        return len(self.devices)

    @property
    def names(self) -> list:
        return [d.name for d in self.devices]

    @property
    def device_types(self) -> set:
        return {d.device_type for d in self.devices}

    def describe(self) -> str:
        if self._description:
            return self._description
        listed = ", ".join(self.names)
        if self.open_cpu:
            listed += " (the CPU may be split into logical devices /device:CPU:N)"
        return listed

    def check(self, text: str) -> str:
        """The canonical name of `text` if it is in this set; else a DeviceError listing it."""
        device = parse_device(text)
        if device.name in self._names:
            return device.name
        if self.open_cpu and device.is_local and device.device_type == "CPU":
            if device.index >= MAX_LOGICAL_CPUS:
                raise DeviceError(f"device {text!r} does not exist: {_LOGICAL_CPUS}")
            return device.name
        hint = ""
        if not device.is_local and self.open_cpu:
            hint = "; name the cluster's devices with --devices to use another job"
        raise DeviceError(f"device {text!r} does not exist; devices: {self.describe()}{hint}")


def _logical_gpu_count() -> int:
    """GPUs as TensorFlow will number them: a GPU split into logical devices counts each.

    Read from the configuration, so that asking does not start TensorFlow's runtime.
    """
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    return sum(len(tf.config.get_logical_device_configuration(gpu) or [None])
               for gpu in tf.config.list_physical_devices("GPU"))
