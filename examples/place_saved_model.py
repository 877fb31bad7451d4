"""Use 2: the command line over a SavedModel: `tf-placeto place`, then plain TensorFlow.

Writes a small Keras model's training step as a SavedModel (any SavedModel works the same),
runs `tf-placeto place SRC --out OUT --devices N --simulate --json` on it, then loads OUT in a
fresh Python that never imports tf_placeto, calls its signature and lists where its ops asked
to run.

    python -m examples.place_saved_model [--out DIR] [--devices N] [--method NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in a Python without tf_placeto: the placed SavedModel is plain TensorFlow.
PLAIN_TENSORFLOW = r"""
import collections, sys
import tensorflow as tf
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * int(sys.argv[2]))
assert "tf_placeto" not in sys.modules
loaded = tf.saved_model.load(sys.argv[1])
step = loaded.signatures["train_step"]
print("loss from the placed SavedModel:", float(step(x=tf.ones([16, 8]), y=tf.ones([16, 1]))["loss"]))
devices = collections.Counter(node.device.rsplit("/", 1)[-1] or "(any)"
                              for f in step.graph.as_graph_def().library.function
                              for node in f.node_def)
print("ops per device in its functions:", dict(devices))
"""

SAVE_MODEL = r"""
import sys
import tensorflow as tf

class Regression(tf.Module):
    def __init__(self):
        self.w1 = tf.Variable(tf.random.normal([8, 32], seed=1))
        self.w2 = tf.Variable(tf.random.normal([32, 1], seed=2))

    @tf.function(input_signature=[tf.TensorSpec([16, 8]), tf.TensorSpec([16, 1])])
    def train_step(self, x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.nn.relu(x @ self.w1) @ self.w2 - y))
        for w, g in zip([self.w1, self.w2], tape.gradient(loss, [self.w1, self.w2])):
            w.assign_sub(0.01 * g)
        return {"loss": loss}

module = Regression()
tf.saved_model.save(module, sys.argv[1], signatures={"train_step": module.train_step})
"""


def _python(code: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                            text=True, env=env, cwd=tempfile.gettempdir())
    if result.returncode:
        sys.exit(f"failed:\n{result.stderr[-2000:]}")
    return result.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join("placeto-out", "regression"))
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--method", default="auto")
    args = parser.parse_args(argv)

    source = f"{args.out}_source"
    _python(SAVE_MODEL, source)
    print(f"wrote the SavedModel {source}")
    command = [sys.executable, "-m", "tf_placeto.cli", "place", source, "--out", args.out,
               "--devices", str(args.devices), "--method", args.method, "--simulate",
               "--overwrite", "--json"]
    print("$ tf-placeto " + " ".join(command[3:]))
    placed = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": REPO})
    if placed.returncode:
        sys.exit(f"tf-placeto place failed ({placed.returncode}): {placed.stderr[-2000:]}")
    summary = json.loads(placed.stdout)
    print(f"placed by {summary.get('chosen', summary['method'])}: predicted step "
          f"{summary['predicted_before_s'] * 1e3:.2f} ms -> {summary['predicted_after_s'] * 1e3:.2f} ms; "
          f"placement in {summary['placement']}")
    print(_python(PLAIN_TENSORFLOW, os.path.abspath(args.out), str(args.devices)), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
