"""This machine as measurements depend on it: its fingerprint, and the cores local workers take.

`machine_fingerprint` names what makes a step time this machine's (host, CPU model, usable
cores, GPU models, TensorFlow's version); runtimes add their own parts (runtime.py).

`CoreClaim`: a local cluster's workers each run on a core of their own (worker.py). Two
tf-placeto processes on one machine must not pin their workers to the same cores: each would
time steps disturbed by the other's and log them as this machine's. A claim takes cores that
no other process holds (a lock file per core, released by the kernel when the process dies)
and waits, saying so once, while too few are free. The clusters of one process share its
cores, and a process started by one that holds cores (a test, a script around the command)
shares that one's: they take turns rather than run at once.
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import socket
import stat
import tempfile
import threading
import time
from typing import Optional

from tf_placeto.errors import RuntimeFailure
from tf_placeto.files import holder_pid, makedirs_private, try_lock

log = logging.getLogger(__name__)

CLAIM_POLL_S = 0.5


@functools.lru_cache(maxsize=None)
def machine_fingerprint() -> dict:
    """This machine as its step times depend on it: host, CPU model, the cores this process
    may use, GPU models and TensorFlow's version."""
    import tensorflow as tf  # heavy: its version and the GPUs it sees

    gpus = [tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in tf.config.list_physical_devices("GPU")]
    return {"host": socket.gethostname(), "cpu": cpu_model(), "cores": len(usable_cores()),
            "gpus": gpus, "tensorflow": tf.__version__}


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (Linux), else what Python knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cores() -> list:
    """The cores this process may run on, in order."""
    affinity = getattr(os, "sched_getaffinity", None)
    return sorted(affinity(0)) if affinity else list(range(os.cpu_count() or 1))


def memory_bytes() -> Optional[int]:
    """This machine's physical memory, or None where it cannot be read."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


class CoreClaim:
    """`count` cores for one cluster's workers (the module's docstring): `cores[i]` is worker
    i's, round robin where the process may use fewer cores than it has workers. Release it
    with release() (a LocalCluster does on close)."""

    def __init__(self, count: int, poll_s: float = CLAIM_POLL_S):
        wanted = min(count, len(usable_cores()))
        self._taken: list = []
        said = False
        while True:
            with _lock:
                chosen = _choose(wanted)
                if chosen is not None:
                    for core in chosen:
                        _take(core)
                    self._taken = chosen
                    break
            if not said:
                busy = _busy_cores()
                log.warning(f"waiting for {wanted} free core(s) for local workers: core(s) "
                            + ", ".join(f"{core} (pid {pid or '?'})" for core, pid in busy)
                            + " run the workers of another tf-placeto process")
                said = True
            time.sleep(poll_s)
        self.cores = [self._taken[i % len(self._taken)] for i in range(count)]

    def release(self) -> None:
        with _lock:
            for core in self._taken:
                _give_back(core)
            self._taken = []


# Cores this process holds: core -> [descriptor of its lock file or None (an ancestor's), uses].
_holds: dict = {}
_lock = threading.RLock()    # re-entrant: a signal handler may close a cluster mid-claim


def _choose(wanted: int) -> Optional[list]:
    """`wanted` cores, those this process (or a process that started it) holds first, then
    free ones; None while too few are free."""
    cores = usable_cores()
    chosen = [core for core in cores if core in _holds][:wanted]
    for core in cores:
        if len(chosen) == wanted:
            break
        if core in chosen:
            continue
        path = _core_file(core)
        fd = try_lock(path)
        if fd is not None:
            _holds[core] = [fd, 0]
            chosen.append(core)
        elif holder_pid(path) in _ancestors():
            _holds[core] = [None, 0]
            chosen.append(core)
    if len(chosen) < wanted:
        for core in chosen:
            if not _holds[core][1]:          # taken just now: let go again while waiting
                _drop(core)
        return None
    return chosen


def _take(core: int) -> None:
    _holds[core][1] += 1


def _give_back(core: int) -> None:
    _holds[core][1] -= 1
    if not _holds[core][1]:
        _drop(core)


def _drop(core: int) -> None:
    fd = _holds.pop(core)[0]
    if fd is not None:
        os.close(fd)


def _busy_cores() -> list:
    return [(core, holder_pid(_core_file(core))) for core in usable_cores()
            if core not in _holds]


def _core_file(core: int) -> str:
    """One lock file per core, in a folder of this user's: machine-wide, whatever cache a
    process uses (a folder of that name that is not this user's is refused)."""
    user_folder = os.path.join(tempfile.gettempdir(), f"tf-placeto-{os.getuid()}")
    makedirs_private(user_folder)
    info = os.lstat(user_folder)
    if info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode):
        raise RuntimeFailure(f"{user_folder} is not a folder of this user's: remove it, or "
                             "set TMPDIR to a private folder")
    folder = makedirs_private(os.path.join(user_folder, "cores"))
    return os.path.join(folder, f"core-{core}.lock")


def _ancestors() -> set:
    """The pids of the processes that started this one, up to init (Linux's /proc)."""
    pids, pid = set(), os.getppid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids
