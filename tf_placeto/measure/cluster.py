"""The machines a placement is measured on: TensorFlow clusters that a v1 Session drives.

A measurement needs devices that truly run in parallel and tensors that cross a real link
between them. `LocalCluster(n)` makes that on one box: n worker processes, each a
`tf.distribute.Server` pinned to its own core (worker.py says how). `ExistingCluster` points at
servers someone else runs. Both give a `target` for `tf.compat.v1.Session`, the device names
to place ops on, and a `session_config()` for that Session.

Local workers never outlive their cluster: they stop on close(), at interpreter exit, on
SIGINT/SIGTERM of this process, and when this process dies by any means (see
tf_placeto.measure.worker).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import functools
import json
import os
import queue
import re
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

from tf_placeto.devices import memory_amount
from tf_placeto.errors import InputError, RuntimeFailure
from tf_placeto.measure import worker
from tf_placeto.measure.machine import CoreClaim, machine_fingerprint, memory_bytes, usable_cores

PING_TIMEOUT_S = 10.0
ALIVE_TIMEOUT_S = 2.0
# How often a blocking call looks at the tasks: local processes cost a poll() each, a remote
# task a TCP connection.
WATCH_LOCAL_S, WATCH_REMOTE_S = 0.1, 2.0
# How often a blocking call on servers someone else runs asks each task's TensorFlow server
# for its devices, and how long one may take to answer: a task that hangs (stopped, swapping,
# deadlocked) still takes TCP connections.
HEALTH_CHECK_S, HEALTH_TIMEOUT_S = 15.0, 10.0
STOP_TIMEOUT_S = 5.0
PORT_ATTEMPTS = 5
_JOB_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
# A count in a local spec: ASCII digits (isdigit() also takes "²"), no more than int() reads.
_SPEC_COUNT = re.compile(r"^[0-9]{1,4000}$")
# Inter-op threads of a local worker: they take turns on its one core, and each reserves a
# stack (8 MiB here) that memory=SIZE counts: 256 threads took 2 GiB of data memory here.
MAX_OP_THREADS = 64


class ClusterError(RuntimeFailure):
    """A cluster that cannot be started or has tasks that do not answer."""


class ClusterSpecError(InputError):
    """A cluster spec that is malformed or asks for what this machine cannot start."""


class WorkerDied(RuntimeFailure):
    """A task of the cluster died (or stopped taking connections, or answering: `hung`)
    during a call; `out_of_memory` when it is known to have died for want of memory."""

    def __init__(self, task: int, address: str, how: str, out_of_memory: bool = False,
                 hung: bool = False):
        super().__init__(f"worker task {task} ({address}) "
                         f"{'stopped answering' if hung else 'died'} during the step: {how}")
        self.task, self.how, self.out_of_memory = task, how, out_of_memory


class Cluster:
    """Tasks of one TensorFlow job, each contributing its CPU:0 as a device.

    The servers know the cluster: each was started with this job name and these addresses.
    """

    def __init__(self, job_name: str, addresses: list):
        self.job_name = job_name
        self.addresses = list(addresses)
        self._caller = None          # the CallThread of watched(), made on first use

    @property
    def target(self) -> str:
        return f"grpc://{self.addresses[0]}"

    @property
    def device_names(self) -> list:
        return [f"/job:{self.job_name}/replica:0/task:{task}/device:CPU:0"
                for task in range(len(self.addresses))]

    def fingerprint(self) -> dict:
        """What makes this cluster's step times its own (runtime.py): servers someone else
        runs are known by their job and addresses, and by this client's TensorFlow."""
        return {"runtime": "cluster", "job": self.job_name, "addresses": list(self.addresses),
                "tensorflow": machine_fingerprint()["tensorflow"]}

    @property
    def cluster_def(self):
        """The cluster the servers were started with (a ClusterDef proto).

        session_config() leaves it out: TensorFlow refuses a ConfigProto cluster_def that names
        the session's target by the job and task it was started as ("The ClusterSpec names the
        job and task index to be the same names that were provided when the server booted").
        """
        import tensorflow as tf  # heavy: loaded when a cluster is used

        return tf.train.ClusterSpec({self.job_name: self.addresses}).as_cluster_def()

    def session_config(self, **kwargs):
        """A ConfigProto for a Session on `target`; keyword arguments are ConfigProto fields.

        Sessions are isolated: each one starts from fresh variables on every task and frees them
        when it closes, so one measurement never sees another's state (TensorFlow's default
        for a cluster is to share variables between all sessions, for ever).
        """
        import tensorflow as tf  # heavy: loaded when a cluster is used

        return tf.compat.v1.ConfigProto(**{"isolate_session_state": True, **kwargs})

    def list_devices(self, timeout_s: float = PING_TIMEOUT_S) -> list:
        """Every device of every task (GPUs included), as the cluster itself reports them.

        Returns TensorFlow's device attributes: `.name`, `.device_type`, `.memory_limit_bytes`.
        """
        import tensorflow as tf  # heavy: loaded when a cluster is used

        config = self.session_config(operation_timeout_in_ms=int(timeout_s * 1000))
        with tf.compat.v1.Session(self.target, graph=tf.Graph(), config=config) as session:
            return session.list_devices()

    def alive(self) -> list:
        """Per task: does its port take a connection? A quick look; check() asks TensorFlow."""
        return [self._connection_problem(task, ALIVE_TIMEOUT_S) is None
                for task in range(len(self.addresses))]

    def death(self, task: int) -> tuple:
        """(how a task that alive() reports dead went, whether it is known to have died for
        want of memory: never from here for servers someone else runs)."""
        return self._connection_problem(task, ALIVE_TIMEOUT_S) or "it answers again", False

    watch_interval_s = WATCH_REMOTE_S
    health_check_s: Optional[float] = HEALTH_CHECK_S

    def watched(self, call):
        """call() on this cluster's call thread while the tasks are watched: a task that dies
        ends the wait within `watch_interval_s` with WorkerDied, instead of at TensorFlow's
        operation timeout. Every `health_check_s` (None: never) each task's server is also
        asked for its devices: one that does not answer within HEALTH_TIMEOUT_S ends the wait
        alike. An error raised while a task is dead is reported as its death too.

        The abandoned call keeps its thread until TensorFlow gives up; later calls get a new
        one. Its session is closed in the background (see runner).
        """
        if self._caller is None:
            self._caller = CallThread()
        future = self._caller.submit(call)
        checked = time.monotonic()
        while not concurrent.futures.wait([future], self.watch_interval_s).done:
            try:
                self._raise_if_dead()
                if self.health_check_s is not None \
                        and time.monotonic() - checked >= self.health_check_s:
                    self._raise_if_hung()
                    checked = time.monotonic()
            except WorkerDied:
                self._caller = None
                raise
        if future.exception() is not None:
            self._raise_if_dead(future.exception())
        return future.result()

    def _raise_if_dead(self, cause=None) -> None:
        dead = [task for task, up in enumerate(self.alive()) if not up]
        if dead:
            note, out_of_memory = self.death(dead[0])
            raise WorkerDied(dead[0], self.addresses[dead[0]], note, out_of_memory) from cause

    def _raise_if_hung(self) -> None:
        for task in range(len(self.addresses)):
            problem = self._status_problem(task, HEALTH_TIMEOUT_S)
            if problem:
                raise WorkerDied(task, self.addresses[task], problem, hung=True)

    def _status_problem(self, task: int, timeout_s: float):
        """Why `task`'s server does not answer its worker service's GetStatus call within
        `timeout_s`, or None. The call a master makes to learn a worker's devices: light,
        served by gRPC threads (so a task busy with a step answers), and it logs nothing."""
        import grpc  # heavy, and a dependency of TensorFlow: loaded when a remote task is watched

        with grpc.insecure_channel(self.addresses[task]) as channel:
            get_status = channel.unary_unary(
                "/tensorflow.WorkerService/GetStatus",
                request_serializer=lambda request: b"",        # GetStatusRequest is empty
                response_deserializer=lambda response: response)
            try:
                get_status(None, timeout=timeout_s)
            except grpc.RpcError as error:
                return f"its TensorFlow server does not answer ({error.code().name}: " \
                       f"{error.details()})"
        return None

    def restart_dead_workers(self) -> list:
        """Servers someone else runs cannot be restarted from here: returns no task."""
        return []

    def check(self, timeout_s: float = PING_TIMEOUT_S) -> None:
        """Raise ClusterError naming every task that does not answer within `timeout_s`."""
        problems = {task: problem for task in range(len(self.addresses))
                    if (problem := self._task_problem(task, timeout_s))}
        if problems:
            raise ClusterError("cluster tasks not answering: " + "; ".join(
                f"task {task} ({self.addresses[task]}): {problem}"
                for task, problem in sorted(problems.items())))

    def _task_problem(self, task: int, timeout_s: float):
        """Why `task` does not answer, or None when it runs a graph on its CPU.

        A TCP connection first fails fast on a dead port; the Session then proves a TensorFlow
        server answers there. The device filter keeps the other tasks out of this question.
        """
        import tensorflow as tf  # heavy: loaded when a cluster is used

        refused = self._connection_problem(task, timeout_s)
        if refused:
            return refused
        config = self.session_config(
            device_filters=[f"/job:{self.job_name}/replica:0/task:{task}"],
            operation_timeout_in_ms=int(timeout_s * 1000))
        try:
            with tf.compat.v1.Session(self.target_of(task), graph=tf.Graph(),
                                      config=config) as session:
                devices = [device.name for device in session.list_devices()]
        except tf.errors.OpError as error:
            message = " ".join(line.strip() for line in error.message.splitlines() if line.strip())
            return f"TensorFlow does not answer ({type(error).__name__}: {message})"
        if self.device_names[task] not in devices:
            return f"it has no device {self.device_names[task]}"
        return None

    def _connection_problem(self, task: int, timeout_s: float):
        host, port = self.addresses[task].rsplit(":", 1)
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
        except OSError as error:
            return f"no connection ({error.strerror or error})"
        return None

    def target_of(self, task: int) -> str:
        return f"grpc://{self.addresses[task]}"

    def close(self) -> None:
        """Nothing to stop for servers someone else runs."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


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
        command = [sys.executable, "-m", "tf_placeto.measure.worker",
                   "--cluster", json.dumps({"worker": self.addresses}), "--task", str(task),
                   "--core", str(self._cores.cores[task]), "--parent-pid", str(os.getpid()),
                   "--op-threads", str(self.op_threads)]
        # the folder that holds the tf_placeto package: a worker imports the same code, and
        # nothing from its working folder (PYTHONSAFEPATH, and that folder is the logs')
        source_root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(worker.__file__))))
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


class ExistingCluster(Cluster):
    """An existing TensorFlow cluster, from a ClusterSpec JSON or TF_CONFIG.

    Its servers were started with that spec. The job measured on is "worker" when the spec has
    one, else its first job.
    """

    @classmethod
    def from_spec(cls, spec: str) -> "ExistingCluster":
        """`spec`: a JSON object, a path to a JSON file, or "TF_CONFIG" (read that variable).

        A TF_CONFIG-style object ({"cluster": {...}, "task": {...}}) is accepted anywhere.
        """
        jobs = _cluster_jobs(*_read_spec(spec))
        job_name = "worker" if "worker" in jobs else next(iter(jobs))
        return cls(job_name, jobs[job_name])


def parse_cluster(spec: str) -> Cluster:
    """"local:N" -> LocalCluster(N) (started); "local:N,memory=SIZE" caps each worker's memory,
    "local:N,threads=T" gives each T inter-op threads; anything else names an existing
    cluster."""
    if spec.startswith("local:"):
        workers, memory, threads = _local_spec(spec)
        return LocalCluster(workers, memory_limit_bytes=memory, op_threads=threads)
    return ExistingCluster.from_spec(spec)


def local_fingerprint(workers: int, memory_limit_bytes: Optional[int], op_threads: int) -> dict:
    """The fingerprint of a LocalCluster with these options (runtime.py)."""
    return {"runtime": "local cluster", "workers": workers, "memory_bytes": memory_limit_bytes,
            "threads": op_threads, **machine_fingerprint()}


def cluster_fingerprint(spec: str) -> dict:
    """The fingerprint parse_cluster(spec) would give, without starting or asking anyone."""
    if spec.startswith("local:"):
        return local_fingerprint(*_local_spec(spec))
    return ExistingCluster.from_spec(spec).fingerprint()


def cluster_device_names(spec: str) -> list:
    """The device names parse_cluster(spec) would give, without starting or asking anyone."""
    if spec.startswith("local:"):
        return Cluster("worker", [""] * _local_spec(spec)[0]).device_names
    return ExistingCluster.from_spec(spec).device_names


def _local_spec(spec: str) -> tuple:
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:   # real-time signals have no name
        return f"signal {number}"


class CallThread:
    """One daemon thread that runs the calls handed to it in turn: a measured step costs no
    thread start. A daemon, so that a call stuck on a dead task never holds up exit."""

    def __init__(self):
        self._calls = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="tf-placeto-call", daemon=True).start()

    def submit(self, call) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        self._calls.put((call, future))
        return future

    def _serve(self):
        while True:
            call, future = self._calls.get()
            try:
                future.set_result(call())
            except BaseException as error:      # handed to the waiting thread
                future.set_exception(error)


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
