"""tf_placeto.optimize(): a tf.function placed on this process's devices, run for real.

The end-to-end check runs in a fresh interpreter that splits the CPU into two logical devices
before TensorFlow starts, and imports Keras 3 first (no tf-agents, no legacy Keras): the
placed step must give the original's results, update the caller's variables, run its ops
where the placement says (read from the runtime's partition graphs), and fall back, with a
warning, on inputs it was not placed for.
"""

import json
import os

import pytest

from tests.helpers import run_python

END_TO_END = r"""
import json, warnings
import numpy as np
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from tensorflow.python.eager import context
import tf_placeto as placeto

keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(4)])
optimizer = keras.optimizers.SGD(0.1)

@tf.function
def train_step(x, y, scale=1.0):
    with tf.GradientTape() as tape:
        loss = scale * tf.reduce_mean(tf.square(model(x) - y))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return {"loss": loss}

x, y = tf.random.normal([16, 10], seed=1), tf.random.normal([16, 4], seed=2)
out = {}
step = placeto.optimize(train_step, (x, y), method=METHOD, measure=MEASURE, cache=CACHE,
                        search=placeto.Search(**OBJECTIVE), verbose=False)
out["devices"] = step.devices
out["kept_as_written"] = step.placement is None
placement = step.placement or {}
out["placed_on"] = sorted(set(placement.values()))
out["measured"] = step.measured is not None
out["predicted_in_flight"] = step.predicted["after"].stream
out["times"] = step.step_times()
out["verdict"], out["limits"] = step.verdict, step.limits
out["ratio_high"] = step.measured["after"].ratio_to_first.get("high") if step.measured else None
report = step.report()
out["report_ops"] = int(report["ops"].sum())
out["report_index"] = list(report.index)
out["placement_ops"] = len(placement)

start = [v.numpy().copy() for v in model.weights + optimizer.variables]
original = train_step(x, y)["loss"].numpy()
after_original = [v.numpy().copy() for v in model.weights]
for v, value in zip(model.weights + optimizer.variables, start):
    v.assign(value)
context.enable_run_metadata()
placed = step(x, y)["loss"].numpy()
metadata = context.export_run_metadata()
context.disable_run_metadata()
after_placed = [v.numpy() for v in model.weights]
out["same_loss"] = bool(np.allclose(original, placed, rtol=1e-5))
out["same_update"] = all(np.allclose(a, b, rtol=1e-5, atol=1e-6)
                         for a, b in zip(after_original, after_placed))
out["changed"] = any(not np.allclose(a, b) for a, b in zip(start, after_placed))
ran = {node.name[len("placed/"):]: node.device for graph in metadata.function_graphs
       for partition in graph.partition_graphs for node in partition.node
       if node.name.startswith("placed/")}
checked = {name: device for name, device in ran.items() if name in placement}
out["checked_ops"] = len(checked)
out["off_device"] = [name for name, device in checked.items()
                     if not device.endswith(placement[name].rsplit("/", 1)[-1])]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    other = step(tf.ones([3, 10]), tf.ones([3, 4]))["loss"].numpy()
out["fallback_warned"] = [str(w.message) for w in caught
                          if issubclass(w.category, placeto.UnplacedCallWarning)]
out["fallback_loss_finite"] = bool(np.isfinite(other))
print("RESULT" + json.dumps(out))
"""


def _run(method: str, measure: str, cache: str, objective: dict = None) -> dict:
    code = END_TO_END.replace("METHOD", repr(method)).replace("MEASURE", repr(measure)) \
        .replace("CACHE", repr(cache)).replace("OBJECTIVE", repr(objective or {}))
    output = run_python(code).stdout
    return json.loads(output.split("RESULT", 1)[1])


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("profiles"))


def test_placed_step_runs_where_placed_and_trains_the_same_variables(cache):
    out = _run("round_robin", "simulate", cache)
    assert out["devices"] == ["/device:CPU:0", "/device:CPU:1"]
    assert out["placed_on"] == out["devices"]          # round robin uses both
    assert out["same_loss"] and out["same_update"] and out["changed"]
    assert out["checked_ops"] > 20 and out["off_device"] == []
    assert not out["measured"]
    assert out["report_index"] == out["devices"]
    assert out["report_ops"] == out["placement_ops"]
    assert len(out["fallback_warned"]) == 1 and "(3, 10)" in out["fallback_warned"][0]
    assert out["fallback_loss_finite"]


def test_auto_measured_in_a_keras_3_process_is_never_slower_than_the_original(cache):
    """Measured for real, a placement is kept only if it is faster beyond the noise; else
    the step runs the original function, as written."""
    out = _run("auto", "real", cache)
    assert out["measured"]
    assert set(out["times"]) == {"predicted_before_s", "predicted_after_s",
                                 "measured_before_s", "measured_after_s"}
    assert out["same_loss"] and out["same_update"] and out["off_device"] == []
    if out["kept_as_written"]:                         # and the verdict says why
        assert out["checked_ops"] == 0 and out["placement_ops"] == 0
        assert ". The profile's bound: no placement on these 2 devices can save" \
            in out["verdict"]
        assert set(out["limits"]) == {"bound_saving"}    # one process: no second task
        assert out["times"]["measured_after_s"] == out["times"]["measured_before_s"]
        assert out["times"]["predicted_after_s"] == out["times"]["predicted_before_s"]
    else:                                              # kept: faster beyond the noise
        assert out["ratio_high"] < 1.0 and out["checked_ops"] > 0
        assert " is faster than the graph as written: " in out["verdict"]
    assert os.listdir(cache)                           # the profile of the first test was kept


def test_a_step_placed_for_throughput_is_predicted_as_a_stream(cache):
    out = _run("m_etf", "simulate", cache, {"objective": "throughput", "stream": 3})
    assert out["predicted_in_flight"] == 3 and out["same_loss"] and out["same_update"]


def test_flat_arguments_follow_the_traced_signature():
    import inspect

    import tensorflow as tf

    from tf_placeto.functions import flat_tensor_arguments

    @tf.function
    def f(a, b, scale=2.0):
        return tf.reduce_sum(a) * scale + b

    concrete = f.get_concrete_function(tf.ones([2]), tf.zeros([3]))
    signature = inspect.signature(f.python_function)
    flat = flat_tensor_arguments(concrete, signature, (), {"b": tf.zeros([3]), "a": tf.ones([2])})
    assert [tuple(t.shape) for t in flat] == [(2,), (3,)]
    assert flat_tensor_arguments(concrete, signature, (tf.ones([5]), tf.zeros([3])), {}) is None
    assert flat_tensor_arguments(concrete, signature, (tf.ones([2]),), {}) is None


def test_unknown_method_and_measure_are_refused():
    import tensorflow as tf

    import tf_placeto as placeto

    @tf.function
    def f(a):
        return a + 1

    with pytest.raises(placeto.PlacetoError, match="unknown method"):
        placeto.optimize(f, (tf.ones([2]),), method="nope")
    with pytest.raises(placeto.PlacetoError, match="measure must be"):
        placeto.optimize(f, (tf.ones([2]),), measure="sometimes")
    with pytest.raises(placeto.PlacetoError, match="pass objective throughput"):
        placeto.optimize(f, (tf.ones([2]),), search=placeto.Search(stream=2))
