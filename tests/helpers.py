"""Helpers shared by the tests: fresh interpreters, the CLI, hashes, simple placements, and
placement problems of the bundled examples built without running anything."""

import hashlib
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# A cost graph in Tarnawski et al.'s JSON format: a fork joined again (a -> b, a -> c, b -> d,
# c -> d, d -> e) on two accelerators of 40 bytes and a CPU; e runs only on the CPU.
FORK_INSTANCE = {
    "maxSizePerFPGA": 40, "maxFPGAs": 2, "maxCPUs": 1,
    "nodes": [{"id": i, "name": name, "supportedOnFpga": name != "e", "cpuLatency": cpu,
               "fpgaLatency": accel, "isBackwardNode": False, "size": 10}
              for i, (name, cpu, accel) in enumerate([("a", 9, 2), ("b", 20, 4), ("c", 20, 4),
                                                      ("d", 9, 2), ("e", 3, 1)])],
    "edges": [{"sourceId": s, "destId": d, "cost": cost}
              for s, d, cost in [(0, 1, 1), (0, 2, 1), (1, 3, 0.5), (2, 3, 0.5), (3, 4, 2)]],
}


def tree_digest(path: str) -> str:
    """A hash of every file under `path` (or of the file): proves a source was not modified."""
    digest = hashlib.sha256()
    paths = [path] if os.path.isfile(path) else sorted(
        os.path.join(root, name) for root, _, names in os.walk(path) for name in names)
    for file in paths:
        digest.update(os.path.relpath(file, path).encode())
        with open(file, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()


def run_python(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter (own TensorFlow runtime), repo on the path, with
    the Keras TensorFlow picks by default (the test process itself runs legacy Keras)."""
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, timeout=timeout, cwd=REPO)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def run_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run the tf-placeto command as a user would."""
    env = {**os.environ, "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-m", "tf_placeto.cli", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=REPO)


def spinner_model(path: str, iterations: int) -> str:
    """A SavedModel (signature "step") whose step runs a loop of `iterations` scalar
    additions: 20 million take about 4 s in this process, 45 s on a one-core worker."""
    import tensorflow as tf

    module = tf.Module()
    module.step = tf.function(
        lambda start: {"count": tf.while_loop(lambda i: i < iterations, lambda i: i + 1,
                                              [start])[0]},
        input_signature=[tf.TensorSpec([], tf.int32)])
    tf.saved_model.save(module, path, signatures={"step": module.step})
    return path


def two_buffers_model(path: str, floats: int) -> str:
    """A SavedModel (signature "step") that fills two buffers of `floats` floats, under
    name scopes "left" and "right", and sums each only once both exist: on one device both
    are held at once, split by scope each device holds one."""
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def step(scale):
        with tf.name_scope("left"):
            left = tf.random.uniform([floats]) * scale
        with tf.name_scope("right"):
            right = tf.random.uniform([floats]) * scale
        with tf.name_scope("left"), tf.control_dependencies([right]):
            left_sum = tf.reduce_sum(left)
        with tf.name_scope("right"), tf.control_dependencies([left]):
            right_sum = tf.reduce_sum(right)
        return {"total": left_sum + right_sum}

    module = tf.Module()
    module.step = step
    tf.saved_model.save(module, path, signatures={"step": step})
    return path


def own_workers() -> list:
    """The pids of worker processes (tf_placeto.measure.runtimes.worker) this process started that
    still run: a command that ends leaves none."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"tf_placeto.measure.runtimes.worker" in command:
            pids.append(int(entry))
    return pids


def kill_later(pid: int, seconds: float):
    """A started timer that kill -9s `pid` after `seconds`, and the list that then holds the
    monotonic time of the kill. Cancel the timer when done."""
    import signal
    import threading
    import time

    killed_at = []

    def kill():
        killed_at.append(time.monotonic())
        os.kill(pid, signal.SIGKILL)

    timer = threading.Timer(seconds, kill)
    timer.start()
    return timer, killed_at


def round_robin(groups, devices=("/device:CPU:0", "/device:CPU:1")) -> dict:
    return groups.placement_for([devices[g % len(devices)] for g in range(len(groups))])


def estimated_cost_model(graph, remote_extra_us=0.0):
    """A profile without running anything: static work estimates, Placeto's link speed;
    `remote_extra_us` per op (or for all): what it takes more with a remote input."""
    import pandas as pd

    from tf_placeto.graph.work import estimate_work
    from tf_placeto.measure.costs.costmodel import CostModel

    ops = pd.DataFrame({"op": [op.name for op in graph.ops], "device_type": "CPU",
                        "compute_us": estimate_work(graph) / 1e3,
                        "output_bytes": [op.output_bytes for op in graph.ops], "traced": True,
                        "remote_extra_us": remote_extra_us})
    pair = ["/device:CPU:0", "/device:CPU:1"]
    links = pd.DataFrame([{"src": a, "dst": b, "latency_us": 25.0, "bytes_per_us": 7600.0}
                          for a in pair for b in pair if a != b])
    return CostModel(ops=ops, links=links, meta={"devices": pair})


def build_problem(groups, n_devices, capacity_bytes=None, remote_extra_us=0.0):
    import tf_placeto as tp
    from tf_placeto.placers.problem import PlacementProblem

    names, model = estimated_cost_model(groups.op_graph, remote_extra_us).with_more_devices(
        n_devices)
    return PlacementProblem.build(groups, model, tp.DeviceSet.from_strings(names),
                                  capacity_bytes=capacity_bytes)


def grouped_example(name, max_groups):
    import tf_placeto as tp
    from tf_placeto.examples import registry

    return tp.group(tp.import_graph(registry.saved_model_path(name)), max_groups=max_groups)


def step_us(problem, decision):
    return problem.simulate(decision).step_time_us
