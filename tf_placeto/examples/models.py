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
        import tf_keras as keras  # heavy: loaded on first use, not with the package

        super().__init__()
        # Saving a tracked Keras model traces every layer's call for Keras' own reloading, most
        # of a build's time; only the weights are needed, so the model is left untracked.
        object.__setattr__(self, "model", model)
        self.model_variables = list(model.variables)
        self.optimizer = keras.optimizers.SGD(learning_rate, momentum=0.9)
        self.optimizer.build(model.trainable_variables)
        self.train_step = tf.function(self._step, input_signature=[input_spec, label_spec])

    def _step(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.loss(x, y)
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return {"loss": loss}

    def loss(self, x, y):
        return _cross_entropy(y, self.model(x, training=True))


class Seq2SeqStep(TrainingStep):
    """Teacher forcing on (source, target): the decoder reads target[:, :-1] and is scored on
    target[:, 1:], so the signature needs no separate decoder input."""

    def loss(self, source, target):
        return _cross_entropy(target[:, 1:], self.model([source, target[:, :-1]], training=True))


def _cross_entropy(labels, logits):
    import tf_keras as keras  # heavy: loaded on first use, not with the package

    return tf.reduce_mean(
        keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True))


def classifier_step(model, batch_size: int, input_shape: tuple, input_dtype=tf.float32,
                    label_shape: tuple = ()) -> TrainingStep:
    """A TrainingStep on a fixed batch of `input_shape` inputs and integer labels."""
    return TrainingStep(model, tf.TensorSpec([batch_size, *input_shape], input_dtype),
                        tf.TensorSpec([batch_size, *label_shape], tf.int32))


def fresh_keras(seed: int = 0):
    """tf-keras with a cleared session and seeded initialisers: names and weights repeat."""
    import tf_keras as keras  # heavy: loaded on first use, not with the package

    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    return keras


def _application(name: str, batch_size: int, image_size: int, classes: int) -> TrainingStep:
    keras = fresh_keras()
    model = getattr(keras.applications, name)(
        weights=None, input_shape=(image_size, image_size, 3), classes=classes,
        classifier_activation=None)
    return classifier_step(model, batch_size, (image_size, image_size, 3))


def inception_v3(batch_size: int = 8, image_size: int = 299, classes: int = 1000) -> TrainingStep:
    """Inception-V3 (Szegedy et al.), batch 8 of 299x299x3 images, 1000 classes."""
    return _application("InceptionV3", batch_size, image_size, classes)


def nasnet(batch_size: int = 8, image_size: int = 224, classes: int = 1000) -> TrainingStep:
    """NASNet-Mobile (Zoph et al.), Placeto's NASNet benchmark: batch 8 of 224x224x3 images."""
    return _application("NASNetMobile", batch_size, image_size, classes)


def nasnet_large(batch_size: int = 8, image_size: int = 331, classes: int = 1000) -> TrainingStep:
    """NASNet-Large, batch 8 of 331x331x3 images: about twice NASNet-Mobile's ops."""
    return _application("NASNetLarge", batch_size, image_size, classes)


def seq2seq(batch_size: int, source_length: int, target_length: int, source_vocab: int,
            target_vocab: int, units: int, cells: tuple = ("lstm", "lstm"),
            attention: str = "luong", seed: int = 0) -> Seq2SeqStep:
    """An attention encoder-decoder, every recurrent layer unrolled in time.

    Unrolled, each time step of each layer is its own ops (a rolled RNN is one While op, which
    leaves a placer nothing to place). Layer k of the encoder and of the decoder use cell type
    cells[k] and are named `encoder_<cell>_<k>` / `decoder_<cell>_<k>`; the decoder layer k
    starts from the encoder layer k's final state. Attention (`luong`: dot product,
    `bahdanau`: additive) reads the top decoder layer and all encoder outputs; `softmax`
    projects onto the target vocabulary. The step's target input holds target_length + 1
    tokens (see Seq2SeqStep).
    """
    keras = fresh_keras(seed)
    layers = keras.layers
    recurrent = {"lstm": layers.LSTM, "gru": layers.GRU}
    source = keras.Input((source_length,), dtype="int32", name="source")
    target = keras.Input((target_length,), dtype="int32", name="target")
    encoded = layers.Embedding(source_vocab, units, name="encoder_embedding")(source)
    states = []
    for k, cell in enumerate(cells):
        encoded, *state = recurrent[cell](units, return_sequences=True, return_state=True,
                                          unroll=True, name=f"encoder_{cell}_{k}")(encoded)
        states.append(state)
    decoded = layers.Embedding(target_vocab, units, name="decoder_embedding")(target)
    for k, cell in enumerate(cells):
        decoded = recurrent[cell](units, return_sequences=True, unroll=True,
                                  name=f"decoder_{cell}_{k}")(decoded, initial_state=states[k])
    scorer = {"luong": layers.Attention, "bahdanau": layers.AdditiveAttention}[attention]
    context = scorer(name="attention")([decoded, encoded])
    combined = layers.Concatenate(name="attention_concat")([decoded, context])
    attended = layers.Dense(units, activation="tanh", name="attention_output")(combined)
    logits = layers.Dense(target_vocab, name="softmax")(attended)
    model = keras.Model([source, target], logits, name="seq2seq")
    return Seq2SeqStep(model, tf.TensorSpec([batch_size, source_length], tf.int32),
                       tf.TensorSpec([batch_size, target_length + 1], tf.int32))


def nmt(layers: int = 2, batch_size: int = 16, source_length: int = 40, target_length: int = 40,
        vocab: int = 8000, units: int = 256) -> Seq2SeqStep:
    """Placeto's NMT benchmark in small: GNMT-like `layers`-deep LSTM encoder and decoder
    with Luong attention, unrolled over 40 source and 40 target tokens, batch 16, 8,000-word
    vocabularies, 256 units."""
    if not 2 <= layers <= 4:
        raise ValueError(f"nmt: layers must be 2 to 4, not {layers}")
    return seq2seq(batch_size, source_length, target_length, vocab, vocab, units,
                   cells=("lstm",) * layers)


def small_cnn(batch_size: int = 4, image_size: int = 32, classes: int = 10) -> TrainingStep:
    """A small two-branch CNN (conv/batch-norm/relu branches, concatenated): fast to test."""
    keras = fresh_keras()
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
    return classifier_step(model, batch_size, (image_size, image_size, 3))


def mlp(batch_size: int = 16, features: int = 32, classes: int = 10) -> TrainingStep:
    """Two dense layers: the smallest real training step."""
    keras = fresh_keras()
    model = keras.Sequential([keras.Input((features,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(classes)], name="mlp")
    return classifier_step(model, batch_size, (features,))
