"""Use 1: place a tf.function's training step with `tf_placeto.optimize()`, then train with it.

Builds a small Keras convolutional classifier and its training step, lets tf_placeto place
the step's ops on this process's devices (the GPUs when there are several, else N logical
CPU devices made here), prints the per-device report and the step times before and after,
and trains a few steps with the placed step: the same variables learn.

    python -m examples.optimize_step [--devices N] [--method NAME] [--steps N]
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2,
                        help="logical CPU devices to make when there is no GPU (default 2)")
    parser.add_argument("--method", default="auto", help="placement method (default auto)")
    parser.add_argument("--steps", type=int, default=5, help="training steps to run")
    parser.add_argument("--cache", default=None, help="where profiles are kept")
    args = parser.parse_args(argv)

    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):       # before the runtime starts
        tf.config.set_logical_device_configuration(
            tf.config.list_physical_devices("CPU")[0],
            [tf.config.LogicalDeviceConfiguration()] * args.devices)
    import keras

    import tf_placeto as placeto

    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((16, 16, 3)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])
    optimizer = keras.optimizers.Adam(1e-2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    images = tf.random.normal([32, 16, 16, 3], seed=1)
    labels = tf.random.uniform([32], maxval=10, dtype=tf.int32, seed=2)
    step = placeto.optimize(train_step, (images, labels), method=args.method, cache=args.cache)

    print(f"\nplaced by {step.info.get('chosen', step.method)} on {len(step.devices)} devices")
    print(step.report().to_string())
    for name, seconds in step.step_times().items():
        print(f"  {name:<22} {seconds * 1e3:8.2f} ms")
    losses = [float(step(images, labels)) for _ in range(args.steps)]
    print("training with the placed step, loss: " + " ".join(f"{v:.3f}" for v in losses))
    return 0 if losses[-1] < losses[0] else 1


if __name__ == "__main__":
    sys.exit(main())
