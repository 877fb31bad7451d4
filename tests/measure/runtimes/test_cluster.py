"""Clusters: real worker processes that run ops in parallel, and that never outlive their owner."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import REPO
from tf_placeto.examples.probes import chains_graph, two_stage_model
from tf_placeto.measure.runtimes import local as local_module, spec as spec_module, worker
from tf_placeto.measure.runtimes.cluster import ClusterError, ExistingCluster, WorkerDied
from tf_placeto.measure.runtimes.local import LocalCluster
from tf_placeto.measure.runtimes.runtime import parse_cluster, planned_cluster
from tf_placeto.measure.runtimes.worker import is_loopback, listen_addresses
from tf_placeto.errors import PlacetoError

FULL_TRACE = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)


def two_task_graph(devices):
    """a = x @ y on devices[0], b = a @ w on devices[1]: `a` must travel between them.

    Returns (graph, b, feeds, expected b). x is fed: Grappler would fold constant matmuls.
    """
    rng = np.random.default_rng(0)
    x, y, w = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
    graph = tf.Graph()
    with graph.as_default():
        fed_x = tf.compat.v1.placeholder(tf.float32, x.shape)
        with tf.device(devices[0]):
            a = tf.matmul(fed_x, y, name="a")
        with tf.device(devices[1]):
            b = tf.matmul(a, w, name="b")
    return graph, b, {fed_x: x}, x @ y @ w


def ops_by_device(run_metadata) -> dict:
    ran = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        ran.setdefault(dev_stats.device, set()).update(n.node_name for n in dev_stats.node_stats)
    return ran


def run_two_task_graph(target, config, devices):
    graph, b, feeds, expected = two_task_graph(devices)
    metadata = tf.compat.v1.RunMetadata()
    with tf.compat.v1.Session(target, graph=graph, config=config) as session:
        result = session.run(b, feeds, options=FULL_TRACE, run_metadata=metadata)
    np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-3)
    return ops_by_device(metadata)


def running(pid: int) -> bool:
    """True while `pid` runs; a zombie nobody reaped yet (the workers' new parent) is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def workers_of(parent_pid: int) -> list:
    """Pids of the worker processes (tf_placeto.measure.runtimes.worker) started by
    `parent_pid`, found in /proc."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                args = cmdline.read().split(b"\0")
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError, PermissionError):
            continue
        if b"tf_placeto.measure.runtimes.worker" in args and str(parent_pid).encode() in args \
                and running(int(entry)):
            pids.append(int(entry))
    return pids


def wait_until_gone(pids, timeout_s=10.0) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if running(pid)]


def test_ops_run_on_both_tasks_and_tensors_cross(cluster):
    ran = run_two_task_graph(cluster.target, cluster.session_config(), cluster.device_names)
    assert "a" in ran[cluster.device_names[0]]
    assert "b" in ran[cluster.device_names[1]]
    assert any("RecvTensor" in names for names in ran.values())   # a crossed over gRPC


def test_names_target_and_config(cluster):
    ports = [address.split(":")[1] for address in cluster.addresses]
    assert cluster.target == f"grpc://127.0.0.1:{ports[0]}"
    assert cluster.device_names == ["/job:worker/replica:0/task:0/device:CPU:0",
                                    "/job:worker/replica:0/task:1/device:CPU:0"]
    assert [d.name for d in cluster.list_devices()] == cluster.device_names
    job, = cluster.cluster_def.job
    assert job.name == "worker" and dict(job.tasks) == dict(enumerate(cluster.addresses))
    config = cluster.session_config(allow_soft_placement=False, operation_timeout_in_ms=5000)
    assert config.isolate_session_state and config.operation_timeout_in_ms == 5000
    assert all(os.path.isfile(path) for path in cluster.log_paths)


def test_workers_listen_on_loopback_only(cluster):
    for address in cluster.addresses:
        listening = listen_addresses(int(address.split(":")[1]))
        assert listening and all(is_loopback(a) for a in listening), listening


def test_sessions_do_not_share_variables(cluster):
    graph = tf.Graph()
    with graph.as_default(), tf.device(cluster.device_names[1]):
        counter = tf.compat.v1.get_variable("counter", initializer=1.0)
        increment = counter.assign_add(1.0)
    with tf.compat.v1.Session(cluster.target, graph=graph,
                              config=cluster.session_config()) as session:
        session.run(counter.initializer)
        assert session.run(increment) == 2.0
    with tf.compat.v1.Session(cluster.target, graph=graph,
                              config=cluster.session_config()) as session:
        with pytest.raises(tf.errors.FailedPreconditionError):
            session.run(counter)


def kernel_spans_us(run_metadata) -> dict:
    """{device: (first kernel start, last kernel end)} in microseconds, from the trace."""
    spans = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        for node in dev_stats.node_stats:
            if node.node_name.startswith("MatMul"):
                begin = node.all_start_micros
                end = begin + node.op_end_rel_micros
                low, high = spans.get(dev_stats.device, (begin, end))
                spans[dev_stats.device] = (min(low, begin), max(high, end))
    return spans


def overlap_share(spans: dict) -> float:
    """How much of the shorter of two devices' spans the other overlaps (0: one after the
    other)."""
    (begin0, end0), (begin1, end1) = spans.values()
    overlap = min(end0, end1) - max(begin0, begin1)
    return max(overlap, 0) / min(end0 - begin0, end1 - begin1)


def test_two_workers_run_in_parallel(cluster):
    """The chains on the two one-core workers run at the same time: their traced matmul spans
    overlap. The best of 3 traced runs counts, as other work on this shared machine can hold a
    worker's core for a while (the timed ratio is measure/bench_cluster.py's figure)."""
    graph, total = chains_graph(cluster.device_names)
    shares = []
    with tf.compat.v1.Session(cluster.target, graph=graph,
                              config=cluster.session_config()) as session:
        session.run(total)                        # warm up: partitions and kernels
        for _ in range(3):
            metadata = tf.compat.v1.RunMetadata()
            session.run(total, options=FULL_TRACE, run_metadata=metadata)
            spans = kernel_spans_us(metadata)
            assert len(spans) == 2, spans
            shares.append(overlap_share(spans))
    assert max(shares) > 0.5, shares


def peer_waits_graph(devices, chain_length: int = 8, size: int = 512):
    """Task 0 makes a small tensor `shared`, then runs a chain of matmuls; task 1 runs one matmul
    on `shared`. Returns (graph, total, fed placeholder)."""
    graph = tf.Graph()
    with graph.as_default():
        fed = tf.compat.v1.placeholder(tf.float32, (size, size))
        with tf.device(devices[0]):
            shared = tf.identity(fed[:64, :64], name="shared")
            x = fed
            for i in range(chain_length):
                x = tf.matmul(x, fed, name=f"chain_{i}")
        with tf.device(devices[1]):
            peer = tf.matmul(shared, shared, name="peer")
        total = tf.reduce_sum(x) + tf.reduce_sum(peer)
    return graph, total, fed


@pytest.mark.alone
def test_a_busy_worker_still_answers_its_peer(cluster):
    """Task 1's matmul starts before task 0's chain ends, in every new session. TensorFlow
    answers a peer's tensor request on the worker's op thread pool: with one op thread, the
    request waited behind the whole chain in about half of the sessions (the step then ran
    the two tasks one after the other). Run alone: beside another test process, a worker's
    core was once held past the chain's end (30 ms) on a slow machine."""
    graph, total, fed = peer_waits_graph(cluster.device_names)
    feed = {fed: np.random.default_rng(0).standard_normal(fed.shape).astype(np.float32) / 23}
    for _ in range(4):
        with tf.compat.v1.Session(cluster.target, graph=graph,
                                  config=cluster.session_config()) as session:
            session.run(total, feed)                     # warm up: partitions and kernels
            metadata = tf.compat.v1.RunMetadata()
            session.run(total, feed, options=FULL_TRACE, run_metadata=metadata)
        starts, ends = {}, {}
        for dev_stats in metadata.step_stats.dev_stats:
            for node in dev_stats.node_stats:
                starts[node.node_name] = node.all_start_nanos + node.op_start_rel_nanos
                ends[node.node_name] = node.all_start_nanos + node.op_end_rel_nanos
        chain_end = max(end for name, end in ends.items() if name.startswith("chain_"))
        assert starts["peer"] < chain_end, (starts["peer"] - chain_end) / 1e6


def existing_specs(addresses, tmp_path, monkeypatch):
    spec_file = tmp_path / "cluster.json"
    spec_file.write_text(json.dumps({"worker": addresses}))
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": addresses},
                                                "task": {"type": "worker", "index": 0}}))
    return [json.dumps({"worker": addresses}), str(spec_file), "TF_CONFIG"]


def test_existing_cluster_from_json_file_and_tf_config(cluster, tmp_path, monkeypatch):
    for spec in existing_specs(cluster.addresses, tmp_path, monkeypatch):
        existing = parse_cluster(spec)
        assert isinstance(existing, ExistingCluster)
        assert existing.target == cluster.target
        assert existing.device_names == cluster.device_names
        existing.check()
        ran = run_two_task_graph(existing.target, existing.session_config(),
                                 existing.device_names)
        assert "b" in ran[existing.device_names[1]]


def test_existing_cluster_job_is_worker_or_the_first():
    assert ExistingCluster.from_spec(
        '{"chief": ["h:1"], "worker": ["h:2", "h:3"]}').device_names[1] == \
        "/job:worker/replica:0/task:1/device:CPU:0"
    trainer = ExistingCluster.from_spec('{"trainer": ["h:1"], "ps": ["h:2"]}')
    assert trainer.job_name == "trainer" and trainer.target == "grpc://h:1"


def test_existing_cluster_reports_a_task_nobody_serves(cluster):
    nobody = f"127.0.0.1:{local_module.free_ports(1)[0]}"
    existing = ExistingCluster.from_spec(json.dumps({"worker": [cluster.addresses[0], nobody]}))
    assert existing.alive() == [True, False]
    assert existing.restart_dead_workers() == []
    with pytest.raises(ClusterError, match=rf"^cluster tasks not answering: task 1 \({nobody}\): "
                                           r"no connection \(Connection refused\)$"):
        existing.check()


def test_check_names_tasks_whose_servers_do_not_match_the_spec(cluster):
    with pytest.raises(ClusterError, match=r"task 0 .*no device /job:trainer/replica:0/task:0"):
        ExistingCluster.from_spec(json.dumps({"trainer": cluster.addresses})).check()


@pytest.mark.parametrize("spec, message", [
    ("{not json", "not valid JSON"),
    ("[]", "neither local:N, a JSON object"),
    ('["worker"]', "neither local:N, a JSON object"),
    ('{"cluster": []}', "expected an object"),
    ("{}", "expected an object"),
    ('{"worker": []}', "must list its tasks"),
    ('{"worker": "127.0.0.1:1"}', "must list its tasks"),
    ('{"worker": ["nohost"]}', "not an address"),
    ('{"worker": ["h:99999"]}', "not an address"),
    ('{"worker": [7]}', "not an address"),
    ('{"1worker": ["h:1"]}', "job name"),
    ("/no/such/cluster.json", "neither local:N"),
    ("TF_CONFIG", "TF_CONFIG variable is not set"),
    ("local:0", "local:N with N >= 1"),
    ("local:x", "local:N with N >= 1"),
    ("local:", "local:N with N >= 1"),
    ("local:2,memory=lots", "memory cap of cluster 'local:2,memory=lots' 'lots': give bytes"),
    ("local:2,memory=0", "'0' must be positive"),
    ("local:2,memory=-1GiB", "give bytes"),
    ("local:2,memory=", "'memory=' is neither memory=SIZE nor threads=T"),
    ("local:2,cores=1", "'cores=1' is neither memory=SIZE nor threads=T"),
    ("local:2,threads=0", "'threads=0' is neither memory=SIZE nor threads=T (T >= 1)"),
])
def test_bad_specs_raise_one_clear_line(spec, message, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(PlacetoError, match=re.escape(message)) as raised:
        parse_cluster(spec)
    assert "\n" not in str(raised.value)


def _op_threads(spec: str) -> str:
    """The --op-threads its first worker was started with."""
    with parse_cluster(spec) as local:
        command = open(f"/proc/{local._processes[0].pid}/cmdline").read().split("\0")
    return command[command.index("--op-threads") + 1]


def test_each_worker_gets_the_inter_op_threads_asked_for():
    """One spec, the same workers for every command: one step or streams of steps."""
    assert _op_threads("local:1") == str(worker.OP_THREADS)
    assert _op_threads("local:1,threads=3") == "3"


def test_a_split_chain_streams_on_workers_of_one_thread(tmp_path):
    """Issue 17's mechanics on the real runtime: two stages of matmuls, the second on the other
    worker, timed as streams of three steps in flight beside both stages on one worker. How
    much faster the split runs is a figure, not a check: `measure.bench_pipeline` prints it
    (docs/results/pipeline.md, "One op at a time per worker": 0.58x to 0.69x, with intervals
    that reach past 1.0x on a busy machine)."""
    from tf_placeto.api import import_graph
    from tf_placeto.measure.evaluation.interleaved import measure_interleaved
    from tf_placeto.measure.runtimes.runtime import open_runtime

    graph = import_graph(two_stage_model(str(tmp_path / "chain"), size=64, chain=3))
    with open_runtime(cluster="local:2,threads=1") as runtime:
        first, second = runtime.device_names
        split = {op.name: second if "stage_2" in op.name else first for op in graph.ops}
        one, both = measure_interleaved(graph, runtime, [None, split], ["one task", "split"],
                                        repeats=3, trace=False, stream=3)
    assert [one.status, both.status] == ["ok", "ok"]
    assert one.stream == both.stream == 3
    for result in (one, both):
        assert 0 < result.interval["low"] <= result.step_time_s <= result.interval["high"]


def test_a_memory_cap_and_threads_name_the_same_devices():
    assert planned_cluster("local:2,memory=1.5GiB")[0] == planned_cluster("local:2")[0]
    assert planned_cluster("local:2,threads=1")[0] == planned_cluster("local:2")[0]
    assert len(planned_cluster("local:2")[0]) == 2


@pytest.mark.parametrize("spec, message", [
    ("local:500", "at most 2 local workers here: each runs on a core of its own, and this "
                  "process may use 2; for more devices in one process, use --devices N"),
    ("local:3", "at most 2 local workers here"),
    ("local:1,memory=1e999GB", "'1e999GB' is more than any memory"),
    ("local:1,memory=64GiB", "64GiB is more than this machine has (32.0 GiB)"),
    ("local:1,threads=65", "at most 64 inter-op threads per worker: they take turns on its one "
                           "core, and each reserves a stack that memory=SIZE counts"),
    ("local:²", "local:N with N >= 1"),
    ("local:1,threads=²", "'threads=²' is neither memory=SIZE nor threads=T"),
])
def test_a_local_spec_asks_for_no_more_than_this_machine_runs(spec, message, monkeypatch):
    """Said where the spec is read, before any worker starts; the machine is made to have 2
    cores and 32 GiB, whatever runs the test. LocalCluster itself shares cores round robin."""
    monkeypatch.setattr(spec_module, "usable_cores", lambda: [0, 1])
    monkeypatch.setattr(spec_module, "memory_bytes", lambda: 32 * 2**30)
    with pytest.raises(PlacetoError, match=re.escape(message)) as raised:
        planned_cluster(spec)[0]
    assert "\n" not in str(raised.value)
    assert len(planned_cluster("local:2,memory=32GiB,threads=64")[0]) == 2


def test_a_memory_cap_below_what_a_worker_uses_is_refused_and_stops_it():
    made = []
    spawn = LocalCluster._spawn
    with pytest.raises(PlacetoError, match=r"a memory cap of 1 MiB per worker is less than a "
                                           r"worker uses before it runs anything \(\d+ MiB"):
        with mock.patch.object(LocalCluster, "_spawn",
                               lambda self, task: made.append(spawn(self, task)) or made[-1]):
            LocalCluster(1, memory_limit_bytes=2**20)
    assert made and all(process.poll() is not None for process in made)


def test_a_worker_the_kernel_kills_for_memory_is_named_out_of_memory(monkeypatch):
    """The kernel's out-of-memory killer cannot be made to strike here: its count in the
    memory control group is what is faked, the kill itself is real."""
    kills = iter(range(100))
    monkeypatch.setattr(local_module, "_oom_kills", lambda: next(kills))
    with LocalCluster(1) as local:
        os.kill(local.pids[0], signal.SIGKILL)
        with pytest.raises(WorkerDied, match=r"killed by SIGKILL \(out of "
                                                            r"memory\)") as raised:
            local.watched(lambda: time.sleep(30))
        assert raised.value.out_of_memory


def test_a_task_of_an_existing_cluster_that_hangs_mid_step_is_reported_in_seconds(cluster):
    existing = ExistingCluster("worker", cluster.addresses)    # servers "someone else" runs
    existing.health_check_s, existing.watch_interval_s = 1.0, 0.2
    asked, ask = [], existing._status_problem
    existing._status_problem = lambda task, timeout_s: asked.append(task) or ask(task, timeout_s)
    graph = tf.Graph()
    with graph.as_default():
        limit = tf.compat.v1.placeholder(tf.int32, [])
        with tf.device(existing.device_names[1]):
            here = tf.identity(limit)               # fed once, then read on task 1 alone
            count = tf.while_loop(lambda i: i < here, lambda i: i + 1, [0])[0]
    with tf.compat.v1.Session(existing.target, graph=graph,
                              config=existing.session_config()) as session:
        # a task busy with a step still answers: a step of about 3 s is checked on the way
        assert existing.watched(lambda: session.run(count, {limit: 500_000})) == 500_000
        assert 1 in asked
        stopper = threading.Timer(1.0, os.kill, (cluster.pids[1], signal.SIGSTOP))
        start = time.monotonic()
        stopper.start()
        try:
            with pytest.raises(WorkerDied,
                               match=r"^worker task 1 \(127\.0\.0\.1:\d+\) stopped answering "
                                     r"during the step: its TensorFlow server does not answer "
                                     r"\(DEADLINE_EXCEEDED"):
                existing.watched(lambda: session.run(count, {limit: 2_000_000}))
            assert time.monotonic() - start < 20
        finally:
            stopper.join()
            os.kill(cluster.pids[1], signal.SIGCONT)
    cluster.restart_dead_workers()
    cluster.check()


def test_bad_json_file_names_the_file(tmp_path):
    spec_file = tmp_path / "cluster.json"
    spec_file.write_text('{"worker": ["h:1",]}')
    with pytest.raises(PlacetoError, match=f"{re.escape(str(spec_file))} is not valid JSON"):
        ExistingCluster.from_spec(str(spec_file))


def test_close_stops_workers_and_frees_ports():
    local = LocalCluster(2)
    run_two_task_graph(local.target, local.session_config(), local.device_names)
    pids, ports = local.pids, [int(a.split(":")[1]) for a in local.addresses]
    local.close()
    local.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):   # reaped, not a zombie
            os.kill(pid, 0)
    assert local.alive() == [False, False]
    assert not os.path.exists(os.path.dirname(local.log_paths[0]))
    for port in ports:
        assert listen_addresses(port) == []
        with socket.socket() as probe:
            # SO_REUSEADDR, as gRPC sets it: a connection in TIME_WAIT may hold the port,
            # only a listening socket would block this bind
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(("127.0.0.1", port))
            probe.listen()


def test_dead_worker_is_reported_and_restarted():
    with LocalCluster(2) as local:
        graph, b, feeds, _ = two_task_graph(local.device_names)
        config = local.session_config(operation_timeout_in_ms=5000)
        old_session = tf.compat.v1.Session(local.target, graph=graph, config=config)
        old_session.run(b, feeds)
        os.kill(local.pids[1], signal.SIGSTOP)   # alive but deaf: the kernel still accepts
        try:
            with pytest.raises(ClusterError, match=r"^cluster tasks not answering: task 1 "
                                                   r"\(127\.0\.0\.1:\d+\): TensorFlow does not "
                                                   r"answer \(DeadlineExceededError"):
                local.check(timeout_s=1)
        finally:
            os.kill(local.pids[1], signal.SIGCONT)
        local.check()
        old_pid = local.pids[1]
        os.kill(old_pid, signal.SIGKILL)
        assert wait_until_gone([old_pid]) == []
        # /proc shows the leader a zombie while its threads still exit; only then can it be
        # reaped, and alive() (a poll) see it dead
        deadline = time.monotonic() + 10
        while local.alive()[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert local.alive() == [True, False]
        with pytest.raises(ClusterError, match=r"task 1 \(127\.0\.0\.1:\d+\): process killed by "
                                               r"SIGKILL") as raised:
            local.check()
        assert "task 0" not in str(raised.value)
        assert local.restart_dead_workers() == [1]
        assert local.alive() == [True, True] and local.pids[1] != old_pid
        local.check()
        with pytest.raises(tf.errors.OpError):   # a session from before the death stays broken
            old_session.run(b, feeds)
        old_session.close()
        ran = run_two_task_graph(local.target, local.session_config(), local.device_names)
        assert "b" in ran[local.device_names[1]]
        assert local.restart_dead_workers() == []


def test_cluster_made_in_a_thread_outlives_the_thread():
    made = []
    maker = threading.Thread(target=lambda: made.append(LocalCluster(1)))
    maker.start()
    maker.join()
    with made[0] as local:
        time.sleep(0.5)   # the kernel's parent-death signal would have come by now
        assert local.alive() == [True]
        local.check()


def test_start_timeout_kills_the_workers_and_names_the_log():
    workers_before = set(workers_of(os.getpid()))   # the module's cluster, when it runs
    with pytest.raises(ClusterError, match=r"task 0 did not start within 0\.01 s") as raised:
        LocalCluster(2, start_timeout_s=0.01)
    assert set(workers_of(os.getpid())) <= workers_before
    log = re.search(r"\(log: (.+)\)$", str(raised.value)).group(1)
    assert os.path.isfile(log)
    shutil.rmtree(os.path.dirname(log))


def test_a_port_taken_after_the_pick_means_new_ports(monkeypatch):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        picks = iter([[taken, *local_module.free_ports(1)]])
        real_free_ports = local_module.free_ports
        monkeypatch.setattr(local_module, "free_ports",
                            lambda count: next(picks, None) or real_free_ports(count))
        with LocalCluster(2) as local:
            assert f"127.0.0.1:{taken}" not in local.addresses
            assert local.alive() == [True, True]
            local.check()


OWNER = """
import json, sys, time
from tf_placeto.measure.runtimes.local import LocalCluster
local = LocalCluster(2)
try:
    print(json.dumps({"pids": local.pids, "logs": local.log_paths}), flush=True)
    time.sleep(120)
except KeyboardInterrupt:
    print(json.dumps({"interrupted": True, "alive": local.alive()}), flush=True)
    sys.exit(130)
"""


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_workers_die_with_their_owner(signum):
    # SIGINT as a terminal delivers it, even when these tests run in a background job (whose
    # children start with SIGINT ignored, and Python then installs no KeyboardInterrupt)
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True,
                             stderr=subprocess.DEVNULL, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": REPO},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        started = json.loads(owner.stdout.readline())
        assert all(running(pid) for pid in started["pids"])
        owner.send_signal(signum)
        rest = owner.communicate(timeout=30)[0]
    finally:
        owner.kill()
        owner.wait()
    assert wait_until_gone(started["pids"], timeout_s=5) == []
    if signum == signal.SIGINT:   # KeyboardInterrupt still reaches the program, workers gone
        assert json.loads(rest) == {"interrupted": True, "alive": [False, False]}
        assert owner.returncode == 130
    else:
        assert owner.returncode == -signum
    if signum != signal.SIGKILL:   # closed cleanly: logs removed
        assert not os.path.exists(os.path.dirname(started["logs"][0]))
    else:
        shutil.rmtree(os.path.dirname(started["logs"][0]))


def test_workers_start_in_a_private_folder_on_cores_of_their_own(tmp_path, monkeypatch):
    """A module in the caller's folder that shadows one a worker imports is never imported,
    and the cluster's runtime is known by its options (not only by its device names)."""
    (tmp_path / "numpy.py").write_text("raise ImportError('the stray numpy.py was imported')\n")
    monkeypatch.chdir(tmp_path)
    with LocalCluster(1, op_threads=1) as local:
        local.check()
        assert local.cores[0] in os.sched_getaffinity(0)
        assert local.fingerprint() == planned_cluster("local:1,threads=1")[1]
        assert local.fingerprint() != planned_cluster("local:1")[1]
