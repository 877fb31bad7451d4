"""The machines a placement is measured on: TensorFlow clusters that a v1 Session drives.

A measurement needs devices that truly run in parallel and tensors that cross a real link
between them. `Cluster` is the tasks of one job, each contributing its CPU:0; it watches them
during a call and says which died or hung. `ExistingCluster` points at servers someone else
runs; `LocalCluster` (local.py) starts its own worker processes. Both give a `target` for
`tf.compat.v1.Session`, the device names to place ops on, and a `session_config()` for that
Session.
"""

from __future__ import annotations

import concurrent.futures
import queue
import socket
import threading
import time
from typing import Optional

from tf_placeto.errors import RuntimeFailure
from tf_placeto.measure.runtimes.machine import machine_fingerprint
from tf_placeto.measure.runtimes.spec import existing_jobs

PING_TIMEOUT_S = 10.0
ALIVE_TIMEOUT_S = 2.0
# How often a blocking call looks at the tasks: local processes cost a poll() each, a remote
# task a TCP connection.
WATCH_LOCAL_S, WATCH_REMOTE_S = 0.1, 2.0
# How often a blocking call on servers someone else runs asks each task's TensorFlow server
# for its devices, and how long one may take to answer: a task that hangs (stopped, swapping,
# deadlocked) still takes TCP connections.
HEALTH_CHECK_S, HEALTH_TIMEOUT_S = 15.0, 10.0


class ClusterError(RuntimeFailure):
    """A cluster that cannot be started or has tasks that do not answer."""


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
        jobs = existing_jobs(spec)
        job_name = "worker" if "worker" in jobs else next(iter(jobs))
        return cls(job_name, jobs[job_name])


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
