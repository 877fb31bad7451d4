"""A Keras application nobody here tuned for: inspect --json, round-robin apply, run it.

Keras 3 (the `keras` package TensorFlow ships with) exports the SavedModel, in its own process.
The placed copy is loaded by plain TensorFlow in a fresh process with two logical CPUs.
"""

import json
import textwrap

import pytest

from tests.helpers import run_python, tree_digest


@pytest.fixture(scope="module")
def keras_app(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("keras") / "mobilenet_v2")
    run_python(textwrap.dedent(f"""
        import os
        os.environ.pop("TF_USE_LEGACY_KERAS", None)
        import keras
        keras.utils.set_random_seed(0)
        model = keras.applications.MobileNetV2(alpha=0.35, input_shape=(96, 96, 3), weights=None)
        model.export({path!r})
    """))
    return path


def test_round_robin_placement_of_a_keras_application(keras_app, tmp_path, cli_here):
    inspected = cli_here("inspect", keras_app, "--json")
    assert inspected.returncode == 0, inspected.stderr
    groups = json.loads(inspected.stdout)["groups"]
    placement = tmp_path / "placement.json"
    placement.write_text(json.dumps({op: f"/device:CPU:{g['id'] % 2}"
                                     for g in groups for op in g["ops"]}))
    out = str(tmp_path / "placed")
    before = tree_digest(keras_app)
    applied = cli_here("apply", keras_app, "--placement", str(placement), "--out", out)
    assert applied.returncode == 0, applied.stderr
    assert tree_digest(keras_app) == before

    checked = run_python(textwrap.dedent(f"""
        import json
        import numpy as np
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from tensorflow.python.eager import context
        x = tf.constant(np.random.default_rng(0).standard_normal((2, 96, 96, 3)), tf.float32)
        outputs, devices = [], []
        for path in ({keras_app!r}, {out!r}):
            serve = tf.saved_model.load(path).signatures["serving_default"]
            context.enable_run_metadata()
            result = serve(x)
            metadata = context.export_run_metadata()
            context.disable_run_metadata()
            outputs.append(next(iter(result.values())).numpy())
            devices.append(sorted({{node.device for f in metadata.function_graphs
                                     for g in f.partition_graphs for node in g.node}}))
        np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-5, atol=1e-6)
        print(json.dumps(devices))
    """))
    original_devices, placed_devices = json.loads(checked.stdout.strip().splitlines()[-1])
    assert len(original_devices) == 1
    assert [d.rsplit("/", 1)[-1] for d in placed_devices] == ["device:CPU:0", "device:CPU:1"]

    from tf_placeto.measure.runtimes.runner import run_traced

    traced = run_traced(out)
    placed = json.loads(placement.read_text())
    ran = {n: d for n, d in traced.node_devices.items() if n in placed}
    assert ran and all(placed[n] == d for n, d in ran.items())
    assert set(ran.values()) == {"/device:CPU:0", "/device:CPU:1"}
