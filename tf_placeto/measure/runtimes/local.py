"""Local worker processes: N TensorFlow servers on 127.0.0.1, each on a core of its own.

Local workers never outlive their cluster: they stop on close(), at interpreter exit, on
SIGINT/SIGTERM of this process, and when this process dies by any means (see worker.py). A
worker that dies is named with how: its exit code or signal, and whether the kernel's
out-of-memory killer took it.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import functools
import json
import os
import pathlib
import resource
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from tf_placeto.measure.runtimes import worker
from tf_placeto.measure.runtimes.cluster import (PING_TIMEOUT_S, WATCH_LOCAL_S, Cluster,
                                                 ClusterError)
from tf_placeto.measure.runtimes.machine import CoreClaim
from tf_placeto.measure.runtimes.spec import ClusterSpecError, local_fingerprint

STOP_TIMEOUT_S = 5.0
PORT_ATTEMPTS = 5


class LocalCluster(Cluster):
    """N TensorFlow worker processes on 127.0.0.1: a real multi-device machine on one box.

    Linux only. Worker i runs on a core of its own, claimed against other processes
    (machine.CoreClaim: a run waits, and says so, while another holds the cores); with more
    workers than the cores this process may use, they share them round robin. Each worker's
    stderr (TensorFlow's native log) goes to `log_paths[i]`, kept until close(), and each
    starts in that private folder, so no stray module in the caller's folder is imported.

    `memory_limit_bytes` caps each worker's data memory (its RLIMIT_DATA, TensorFlow's own
    runtime included): a tensor that would pass it fails with ResourceExhausted on that
    worker's device, as on a device that is full, and the worker lives on. `op_threads`: each
    worker's inter-op threads (worker.OP_THREADS says why several; 1 brings back the race
    in which a peer's request waits behind every queued op, measure/bench_sessions.py).
    """

    def __init__(self, num_workers: int, start_timeout_s: float = 60,
                 memory_limit_bytes: Optional[int] = None,
                 op_threads: int = worker.OP_THREADS):
        if num_workers < 1:
            raise ClusterSpecError(f"a local cluster needs at least one worker, "
                                   f"not {num_workers}")
        if not sys.platform.startswith("linux"):
            raise ClusterSpecError("local clusters need Linux; start servers yourself and "
                                   "pass their ClusterSpec JSON")
        super().__init__("worker", [])
        self.start_timeout_s = start_timeout_s
        self.memory_limit_bytes = memory_limit_bytes
        self.op_threads = op_threads
        self._processes = [None] * num_workers
        self._oom_kills_at_start = [None] * num_workers
        self._log_dir = tempfile.mkdtemp(prefix="tf-placeto-cluster-")
        self.log_paths = [os.path.join(self._log_dir, f"worker-{task}.log")
                          for task in range(num_workers)]
        self._cores = CoreClaim(num_workers)
        _open_clusters.add(self)
        _install_cleanup()
        try:
            self._start_on_free_ports()
        except BaseException:
            self._stop_workers()   # the logs stay: the error names them
            self._cores.release()
            _open_clusters.discard(self)
            raise

    watch_interval_s = WATCH_LOCAL_S
    health_check_s = None          # its processes are watched instead

    def alive(self) -> list:
        """Per task: is its worker process running?"""
        return [process.poll() is None for process in self._processes]

    @property
    def pids(self) -> list:
        return [process.pid for process in self._processes]

    def check(self, timeout_s: float = PING_TIMEOUT_S) -> None:
        dead = {task: self.death(task)[0] for task, up in enumerate(self.alive()) if not up}
        if dead:
            raise ClusterError("cluster tasks not answering: " + "; ".join(
                f"task {task} ({self.addresses[task]}): {note}" for task, note in dead.items()))
        super().check(timeout_s)

    def restart_dead_workers(self) -> list:
        """Start again, on their old ports, the workers that died; returns their task indices.

        Sessions opened before a worker died keep failing; open a new Session afterwards.
        """
        dead = [task for task, up in enumerate(self.alive()) if not up]
        try:
            self._start(dead)
        except _PortTaken as taken:
            self._stop_workers(dead)
            raise ClusterError(f"cannot restart task {taken.task}: another process took port "
                               f"{self.addresses[taken.task]}; start a new LocalCluster") from None
        except BaseException:
            self._stop_workers(dead)
            raise
        return dead

    def fingerprint(self) -> dict:
        """This machine, and the workers' number and options (runtime.py)."""
        return local_fingerprint(len(self._processes), self.memory_limit_bytes,
                                 self.op_threads)

    @property
    def cores(self) -> list:
        """The core each worker runs on."""
        return list(self._cores.cores)

    def close(self) -> None:
        """Stop every worker and wait for it, freeing its port and its core; remove the
        logs."""
        self._stop_workers()
        self._cores.release()
        shutil.rmtree(self._log_dir, ignore_errors=True)
        _open_clusters.discard(self)

    def _start_on_free_ports(self) -> None:
        """Start all workers; a port taken between our pick and a worker's bind: new ports."""
        for _ in range(PORT_ATTEMPTS):
            self.addresses = [f"127.0.0.1:{port}" for port in free_ports(len(self._processes))]
            try:
                self._start(range(len(self._processes)))
                return
            except _PortTaken:
                self._stop_workers()
        raise ClusterError(f"no free ports for {len(self._processes)} workers after "
                           f"{PORT_ATTEMPTS} attempts")

    def _start(self, tasks) -> None:
        for task in tasks:
            self._oom_kills_at_start[task] = _oom_kills()
            self._processes[task] = self._spawn(task)
        self._wait_until_ready(tasks)
        if self.memory_limit_bytes is not None:
            for task in tasks:
                self._limit_memory(task)

    def _limit_memory(self, task: int) -> None:
        """Cap a ready worker's data memory, once TensorFlow is loaded: a cap it already
        passes would fail every step, so it is an error that says how much the worker uses."""
        process = self._processes[task]
        used = _data_memory_bytes(process.pid)
        if used is not None and used >= self.memory_limit_bytes:
            raise ClusterSpecError(
                f"a memory cap of {self.memory_limit_bytes / 2**20:.0f} MiB per worker is less "
                f"than a worker uses before it runs anything ({used / 2**20:.0f} MiB here); "
                "ask for more")
        resource.prlimit(process.pid, resource.RLIMIT_DATA,
                         (self.memory_limit_bytes, self.memory_limit_bytes))

    def _spawn(self, task: int) -> subprocess.Popen:
        command = [sys.executable, "-m", "tf_placeto.measure.runtimes.worker",
                   "--cluster", json.dumps({"worker": self.addresses}), "--task", str(task),
                   "--core", str(self._cores.cores[task]), "--parent-pid", str(os.getpid()),
                   "--op-threads", str(self.op_threads)]
        # the folder that holds the tf_placeto package: a worker imports the same code, and
        # nothing from its working folder (PYTHONSAFEPATH, and that folder is the logs')
        source_root = str(pathlib.Path(worker.__file__).resolve().parents[3])
        env = {**os.environ, "PYTHONSAFEPATH": "1", "PYTHONPATH": os.pathsep.join(
            filter(None, [source_root, os.environ.get("PYTHONPATH")]))}
        with open(self.log_paths[task], "ab") as log:
            # start_new_session: a Ctrl-C in the terminal reaches this process, which stops
            # the workers itself, instead of killing them under a measurement it may finish.
            return _SPAWNER.submit(subprocess.Popen, command, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=log, env=env,
                                   cwd=self._log_dir, start_new_session=True).result()

    def _wait_until_ready(self, tasks) -> None:
        """Read each worker's stdout (raw: a buffered reader could hide a line from select)."""
        deadline = time.monotonic() + self.start_timeout_s
        waiting = {self._processes[task].stdout.fileno(): task for task in tasks}
        received = {fd: b"" for fd in waiting}
        with selectors.DefaultSelector() as selector:
            for fd in waiting:
                selector.register(fd, selectors.EVENT_READ)
            while waiting:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    task = min(waiting.values())
                    raise ClusterError(
                        f"worker task {task} did not start within {self.start_timeout_s:g} s; "
                        f"its last log line: {self._last_log_line(task)!r} "
                        f"(log: {self.log_paths[task]})")
                for key, _ in selector.select(remaining):
                    chunk = os.read(key.fd, 4096)
                    received[key.fd] += chunk
                    lines = received[key.fd].decode(errors="replace").split("\n")[:-1]
                    if not chunk or any(line.startswith(worker.READY_LINE) for line in lines):
                        selector.unregister(key.fd)
                        task = waiting.pop(key.fd)
                        self._processes[task].stdout.close()
                        if not chunk:
                            self._raise_start_failure(task)

    def _raise_start_failure(self, task: int):
        process = self._processes[task]
        process.wait()
        if process.returncode == worker.EXIT_PORT_TAKEN:
            raise _PortTaken(task)
        raise ClusterError(f"worker task {task} failed to start: {self.death(task)[0]} "
                           f"(log: {self.log_paths[task]})")

    def death(self, task: int) -> tuple:
        """Out of memory: the kernel's out-of-memory killer killed a process of this
        machine's memory control group since the worker started (its oom_kill count grew),
        and the worker died by SIGKILL; or the C++ runtime could not allocate
        (std::bad_alloc) and aborted."""
        code = self._processes[task].wait()
        last_line = self._last_log_line(task)
        if code == -signal.SIGKILL:
            before, now = self._oom_kills_at_start[task], _oom_kills()
            out_of_memory = before is not None and now is not None and now > before
        else:
            out_of_memory = code == -signal.SIGABRT and "bad_alloc" in last_line
        how = f"exited with code {code}" if code >= 0 else f"killed by {_signal_name(-code)}"
        if out_of_memory:
            how += " (out of memory)"
        elif code == -signal.SIGKILL:
            how += " (as the kernel kills a process out of memory, or kill -9)"
        return f"process {how}; last log line: {last_line!r}", out_of_memory

    def _last_log_line(self, task: int) -> str:
        try:
            with open(self.log_paths[task], errors="replace") as log:
                lines = [line.strip() for line in log if line.strip()]
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def _stop_workers(self, tasks=None) -> None:
        """SIGTERM (a worker's default action is to exit), SIGKILL after a grace period, reap.

        Every wait has a timeout: a signal handler may run this while close() is already
        waiting, and a wait without one would block on the lock that close() holds.
        """
        tasks = range(len(self._processes)) if tasks is None else tasks
        processes = [self._processes[task] for task in tasks if self._processes[task] is not None]
        for process in processes:
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=STOP_TIMEOUT_S)
            process.stdout.close()


def _oom_kills():
    """How many processes the kernel's out-of-memory killer has killed in this process's
    memory control group (cgroup v2, then v1), or None where neither can be read."""
    for path, field in (("/sys/fs/cgroup/memory.events", "oom_kill"),
                        ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")):
        try:
            with open(path) as counters:
                for line in counters:
                    name, _, value = line.partition(" ")
                    if name == field:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _data_memory_bytes(pid: int):
    """A process's data memory (VmData, what RLIMIT_DATA caps), or None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def free_ports(count: int) -> list:
    """`count` distinct ports that were free a moment ago (another process may still take one)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:   # real-time signals have no name
        return f"signal {number}"


class _PortTaken(Exception):
    def __init__(self, task: int):
        super().__init__(task)
        self.task = task


# The kernel sends a worker's parent-death signal when the *thread* that started it exits, so
# workers are started from this one thread, which lives as long as the process.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1,
                                                 thread_name_prefix="tf-placeto-spawner")
_open_clusters: set = set()
_cleanup = {"atexit": False, "signals": False}


def _close_all() -> None:
    for cluster in list(_open_clusters):
        cluster.close()


def _install_cleanup() -> None:
    """Close every open LocalCluster at exit and on SIGINT/SIGTERM, then do what was done before.

    Signal handlers can only be set from the main thread; a cluster made elsewhere still stops
    at exit, and its workers die with this process.
    """
    if not _cleanup["atexit"]:
        atexit.register(_close_all)
        _cleanup["atexit"] = True
    if _cleanup["signals"] or threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        if previous not in (signal.SIG_IGN, None):   # None: a handler set outside Python
            signal.signal(signum, functools.partial(_close_all_then_chain, previous))
    _cleanup["signals"] = True


def _close_all_then_chain(previous, signum, frame) -> None:
    _close_all()
    if callable(previous):
        previous(signum, frame)     # SIGINT's default handler raises KeyboardInterrupt
    else:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
