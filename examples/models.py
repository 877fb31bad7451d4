"""Training steps (forward, backward, optimizer update) of the bundled example models.

Each builder returns a tf.Module whose `train_step` tf.function has a fixed input signature
and returns {"loss": ...}. Everything is built locally with weights=None: no downloads.
Models use tf-keras (Keras 2), whose graphs are the sizes the papers' benchmarks report.
"""

from __future__ import annotations

import tensorflow as tf


class TrainingStep(tf.Module):
    """One SGD-with-momentum step of `model` on (inputs, integer labels)."""

    def __init__(self, model, input_spec: tf.TensorSpec, label_spec: tf.TensorSpec,
                 learning_rate: float = 0.01):
        import tf_keras as keras

        super().__init__()
        self.model = model
        self.optimizer = keras.optimizers.SGD(learning_rate, momentum=0.9)
        self.optimizer.build(model.trainable_variables)
        self.train_step = tf.function(self._step, input_signature=[input_spec, label_spec])

    def _step(self, x, y):
        import tf_keras as keras

        with tf.GradientTape() as tape:
            logits = self.model(x, training=True)
            loss = tf.reduce_mean(
                keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return {"loss": loss}


def _fresh_keras(seed: int = 0):
    import tf_keras as keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    return keras


def inception_v3(batch_size: int = 8, image_size: int = 299, classes: int = 1000) -> TrainingStep:
    """Inception-V3 (Szegedy et al.), batch 8 of 299x299x3 images, 1000 classes."""
    keras = _fresh_keras()
    model = keras.applications.InceptionV3(weights=None, input_shape=(image_size, image_size, 3),
                                           classes=classes, classifier_activation=None)
    return TrainingStep(model, tf.TensorSpec([batch_size, image_size, image_size, 3], tf.float32),
                        tf.TensorSpec([batch_size], tf.int32))


def small_cnn(batch_size: int = 4, image_size: int = 32, classes: int = 10) -> TrainingStep:
    """A small two-branch CNN (conv/batch-norm/relu branches, concatenated): fast to test."""
    keras = _fresh_keras()
    layers = keras.layers
    inputs = keras.Input((image_size, image_size, 3))
    stem = layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    stem = layers.ReLU()(layers.BatchNormalization()(stem))
    left = layers.Conv2D(8, 1, activation="relu")(stem)
    right = layers.Conv2D(8, 3, padding="same", activation="relu")(stem)
    merged = layers.Concatenate()([left, right])
    pooled = layers.GlobalAveragePooling2D()(merged)
    outputs = layers.Dense(classes)(pooled)
    model = keras.Model(inputs, outputs, name="small_cnn")
    return TrainingStep(model, tf.TensorSpec([batch_size, image_size, image_size, 3], tf.float32),
                        tf.TensorSpec([batch_size], tf.int32))


def mlp(batch_size: int = 16, features: int = 32, classes: int = 10) -> TrainingStep:
    """Two dense layers: the smallest real training step."""
    keras = _fresh_keras()
    model = keras.Sequential([keras.Input((features,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(classes)], name="mlp")
    return TrainingStep(model, tf.TensorSpec([batch_size, features], tf.float32),
                        tf.TensorSpec([batch_size], tf.int32))
