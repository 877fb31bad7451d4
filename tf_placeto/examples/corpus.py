"""A corpus of real TF2 graphs to learn placement from, each of a named family.

Placeto's policy has been trained on synthetic families alone (families.py); this corpus
adds real models of many kinds: Keras applications (residual, inverted-residual, NAS cells,
Inception, Xception, EfficientNet, DenseNet), transformer encoders and decoders, recurrent
models, recommenders with embedding tables, training steps with SGD and Adam, control flow,
and members of the ENAS-like families. A family names what a model is made of, so that
training can hold a whole family out. Inputs are small (each graph builds in seconds and
profiles in seconds to a few minutes on two CPUs), weights random from fixed seeds, as
held_out.py's.

Each builder returns a tf.Module whose `serve` tf.function has a fixed input signature;
measure/build_corpus.py saves it with the SIGNATURE signature in a child process, profiles
it and keeps only its compact cost profile (tf_placeto.placers.compact).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Callable

import numpy as np

from tf_placeto.examples import families, held_out

SIGNATURE = held_out.SIGNATURE     # every model is served as the held-out ones are
# The committed corpus: one compact cost profile per model (measure/build_corpus.py)
PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_profiles")


def application(name: str, image_size: int, batch_size: int = 2):
    """Inference of keras.applications.`name` (weights=None) on a batch of square images."""
    keras = held_out._fresh_keras()
    model = getattr(keras.applications, name)(weights=None,
                                              input_shape=(image_size, image_size, 3))
    return held_out.keras_inference(model, batch_size)


def decoder(blocks: int = 2, seq: int = 32, d_model: int = 64, heads: int = 4,
            vocab: int = 1000, batch_size: int = 8, memory: int = 16):
    """A transformer decoder serving next-token logits: token embeddings plus sinusoidal
    positions, per block causal self-attention, cross-attention over `memory` encoder
    states, FFN, LayerNorm."""
    keras = held_out._fresh_keras()
    tokens = keras.Input((seq,), dtype="int32")
    encoded = keras.Input((memory, d_model))
    x = _decoder_body(keras, tokens, encoded, blocks, seq, d_model, heads, vocab)
    return held_out.keras_serving(keras.Model([tokens, encoded], x),
                                  ((batch_size, seq), "int32"),
                                  ((batch_size, memory, d_model), "float32"))


def _decoder_body(keras, tokens, encoded, blocks, seq, d_model, heads, vocab):
    """The decoder's logits, shared by serving and the language model (encoded None: no
    cross-attention)."""
    layers = keras.layers
    x = layers.Embedding(vocab, d_model)(tokens) + _positions(seq, d_model)
    for _ in range(blocks):
        attended = layers.MultiHeadAttention(heads, d_model // heads)(x, x,
                                                                      use_causal_mask=True)
        x = layers.LayerNormalization()(x + attended)
        if encoded is not None:
            crossed = layers.MultiHeadAttention(heads, d_model // heads)(x, encoded)
            x = layers.LayerNormalization()(x + crossed)
        hidden = layers.Dense(4 * d_model, activation="gelu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(d_model)(hidden))
    return layers.Dense(vocab)(x)


def _positions(seq: int, d_model: int) -> np.ndarray:
    """The sinusoidal position encoding of Vaswani et al., (seq, d_model) float32."""
    angles = np.arange(seq)[:, None] / 10_000 ** (np.arange(0, d_model, 2) / d_model)
    return np.stack([np.sin(angles), np.cos(angles)], axis=-1).reshape(seq, d_model).astype(
        np.float32)


def language_model(blocks: int = 2, seq: int = 32, d_model: int = 64, heads: int = 4,
                   vocab: int = 1000, batch_size: int = 8):
    """One Adam step of a decoder-only (GPT-like) language model: the decoder without
    cross-attention, scored on the next token."""
    keras = held_out._fresh_keras()
    tokens = keras.Input((seq,), dtype="int32")
    model = keras.Model(tokens, _decoder_body(keras, tokens, None, blocks, seq, d_model, heads,
                                              vocab))
    return adam_step(model, ((batch_size, seq), "int32"))


def dlrm(tables: int = 8, rows: int = 10_000, width: int = 16, dense: int = 13,
         batch_size: int = 64):
    """One Adam step of a DLRM-like recommender: a bottom MLP over dense features, one
    embedding table per categorical feature, pairwise dot-product interactions, a top MLP,
    a click logit under binary cross-entropy."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    features = keras.Input((dense,))
    ids = keras.Input((tables,), dtype="int32")
    bottom = layers.Dense(width, activation="relu")(layers.Dense(64, activation="relu")(
        features))
    vectors = [layers.Embedding(rows, width)(ids[:, k]) for k in range(tables)]
    stacked = layers.Lambda(lambda v: keras.backend.stack(v, axis=1))([bottom, *vectors])
    interactions = layers.Flatten()(layers.Dot(axes=2)([stacked, stacked]))
    top = layers.Dense(64, activation="relu")(layers.Concatenate()([bottom, interactions]))
    model = keras.Model([features, ids], layers.Dense(1)(top))
    return adam_step(model, ((batch_size, dense), "float32"), ((batch_size, tables), "int32"),
                     labels=((batch_size, 1), "float32"), binary=True)


def wide_and_deep(tables: int = 6, rows: int = 5_000, width: int = 32, batch_size: int = 64):
    """Wide & Deep inference: a linear (wide) part over the one-hot categorical features (one
    weight per id, in one table), and an MLP (deep) over their concatenated embeddings."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    ids = keras.Input((tables,), dtype="int32")
    deep = layers.Concatenate()([layers.Embedding(rows, width)(ids[:, k])
                                 for k in range(tables)])
    for units in (256, 128, 64):
        deep = layers.Dense(units, activation="relu")(deep)
    wide = layers.Flatten()(layers.Embedding(tables * rows, 1)(
        ids + keras.backend.constant([k * rows for k in range(tables)], dtype="int32")))
    logit = layers.Add()([layers.Dense(1)(deep), layers.Lambda(
        lambda w: keras.backend.sum(w, axis=1, keepdims=True))(wide)])
    return held_out.keras_inference(keras.Model(ids, logit), batch_size, dtype="int32")


def adam_step(model, *inputs, labels=None, binary: bool = False):
    """A tf.Module whose `serve` is one Adam step of `model` on `inputs` ((shape, dtype)) and
    `labels` (default: integer labels shaped like the last input, as a language model's next
    tokens); the loss returned. The Keras model stays untracked, its weights are kept."""
    import tensorflow as tf  # heavy: loaded by the builders only
    import tf_keras as keras  # heavy: loaded by the builders only

    labels = labels or inputs[-1]
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    features = slice(0, len(inputs)) if len(inputs) > 1 else 0     # what the model reads

    def step(*tensors):
        y = tensors[-1]
        with tf.GradientTape() as tape:
            logits = model(tensors[features], training=True)
            loss = tf.reduce_mean(
                keras.losses.binary_crossentropy(y, logits, from_logits=True) if binary else
                keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}

    module = held_out.serving(step, *inputs, labels)
    module.model_variables = list(model.variables)
    module.optimizer = optimizer
    return module


def enas(family: str, seed: int):
    """Member `seed` of an ENAS-like family (families.py): its SGD-momentum training step."""
    return _served(families.build(family, seed))


def small_cnn():
    """The bundled examples:small_cnn: a two-branch CNN's SGD-momentum training step."""
    from tf_placeto.examples import models  # heavy: imports TensorFlow

    return _served(models.small_cnn())


def _served(step):
    """A bundled training step (models.TrainingStep) whose step is also its `serve`."""
    step.serve = step.train_step
    return step


@dataclasses.dataclass(frozen=True)
class CorpusModel:
    name: str
    family: str           # what the model is made of; training holds whole families out
    builder: Callable     # () -> a tf.Module with a `serve` tf.function
    description: str
    version: int = 1      # bump when the builder changes: the build's cache key includes it


_app = functools.partial
# families.py's ENAS-like families, as the corpus names them
ENAS_FAMILIES = {"cifar10": "enas_cifar10", "ptb": "enas_ptb", "nmt_family": "enas_nmt"}
FAMILIES = {
    "residual": "ResNets: convolutions with identity shortcuts",
    "inverted_residual": "MobileNets: depthwise convolutions in inverted bottlenecks",
    "nas": "NASNet's cells found by architecture search",
    "inception": "Inception modules: parallel convolution towers, concatenated",
    "xception": "depthwise-separable convolutions with shortcuts",
    "efficientnet": "compound-scaled MBConv blocks with squeeze-and-excite",
    "densenet": "dense blocks: each layer reads every earlier one",
    "transformer_encoder": "self-attention and feed-forward blocks",
    "transformer_decoder": "causal self-attention (and cross-attention) blocks",
    "recurrent": "Keras LSTM and GRU layers (their While loops)",
    "recommender": "embedding tables under MLPs",
    "plain_cnn": "a plain convolutional stack's training step",
    "control_flow": "tf.cond and tf.while_loop over matmuls",
    "branches": "independent matmul chains",
    "lookup": "a string hash table before an embedding",
    **{ours: f"families.py's {family}: {families.FAMILIES[family][1]}"
       for family, ours in ENAS_FAMILIES.items()},
}
ENTRIES = (
    CorpusModel("resnet50", "residual", held_out.resnet50,
                "ResNet50 inference, batch 8 of 64x64x3 (held_out.py's)"),
    CorpusModel("resnet50_v2", "residual", _app(application, "ResNet50V2", 32),
                "ResNet50V2 (pre-activation) inference, batch 2 of 32x32x3"),
    CorpusModel("mobilenet_v2", "inverted_residual", held_out.mobilenet_v2,
                "MobileNetV2 inference, batch 8 of 96x96x3 (held_out.py's)"),
    CorpusModel("mobilenet_v3_small", "inverted_residual",
                _app(application, "MobileNetV3Small", 64),
                "MobileNetV3-Small (squeeze-excite, hard-swish) inference, batch 2 of 64x64x3"),
    CorpusModel("nasnet_mobile", "nas", _app(application, "NASNetMobile", 32),
                "NASNet-Mobile (searched cells) inference, batch 2 of 32x32x3"),
    CorpusModel("inception_v3", "inception", _app(application, "InceptionV3", 75),
                "Inception-V3 inference, batch 2 of 75x75x3"),
    CorpusModel("inception_resnet_v2", "inception", _app(application, "InceptionResNetV2", 75),
                "Inception-ResNet-V2 inference, batch 2 of 75x75x3"),
    CorpusModel("xception", "xception", _app(application, "Xception", 71),
                "Xception (depthwise-separable) inference, batch 2 of 71x71x3"),
    CorpusModel("efficientnet_b0", "efficientnet", _app(application, "EfficientNetB0", 64),
                "EfficientNet-B0 inference, batch 2 of 64x64x3"),
    CorpusModel("efficientnet_v2_b0", "efficientnet",
                _app(application, "EfficientNetV2B0", 64),
                "EfficientNetV2-B0 (fused MBConv) inference, batch 2 of 64x64x3"),
    CorpusModel("densenet121", "densenet", _app(application, "DenseNet121", 32),
                "DenseNet-121 inference, batch 2 of 32x32x3"),
    CorpusModel("transformer_encoder", "transformer_encoder", held_out.transformer,
                "two encoder blocks, batch 8, seq 64, d_model 128, 4 heads (held_out.py's)"),
    CorpusModel("transformer_encoder_deep", "transformer_encoder",
                _app(held_out.transformer, blocks=4, seq=32, d_model=64, heads=2),
                "four encoder blocks, batch 8, seq 32, d_model 64, 2 heads"),
    CorpusModel("transformer_decoder", "transformer_decoder", decoder,
                "two decoder blocks (causal self- and cross-attention), batch 8, seq 32, "
                "d_model 64, 1,000-token vocabulary"),
    CorpusModel("gpt_adam_step", "transformer_decoder", language_model,
                "one Adam step of a 2-block decoder-only language model, batch 8, seq 32, "
                "d_model 64"),
    CorpusModel("lstm", "recurrent", held_out.lstm,
                "Embedding + LSTM(128) + Dense, batch 16, seq 32 (held_out.py's)"),
    CorpusModel("gru", "recurrent", held_out.gru,
                "Embedding + Bidirectional(GRU(64)) + Dense, batch 16, seq 32 (held_out.py's)"),
    CorpusModel("dlrm_adam_step", "recommender", dlrm,
                "one Adam step of a DLRM-like model: 8 tables of 10,000 x 16, batch 64"),
    CorpusModel("wide_and_deep", "recommender", wide_and_deep,
                "Wide & Deep inference: 6 tables of 5,000 x 32, batch 64"),
    CorpusModel("cnn_sgd_step", "plain_cnn", held_out.train_step,
                "one SGD-momentum step of a small CNN, batch 32 of 32x32x3 (held_out.py's)"),
    CorpusModel("small_cnn_sgd_step", "plain_cnn", small_cnn,
                "examples:small_cnn: one SGD-momentum step of a two-branch CNN, batch 4 of "
                "32x32x3"),
    CorpusModel("control_flow", "control_flow", held_out.control_flow,
                "tf.cond + tf.while_loop over 256x256 matmuls, 8 turns (held_out.py's)"),
    CorpusModel("control_flow_long", "control_flow",
                _app(held_out.control_flow, size=128, iterations=32),
                "tf.cond + tf.while_loop over 128x128 matmuls, 32 turns"),
    CorpusModel("branches", "branches", held_out.branches,
                "four independent chains of 4 matmuls 512x512, summed (held_out.py's)"),
    CorpusModel("lookup", "lookup", held_out.lookup,
                "string StaticHashTable + embedding + dense, batch 32x16 (held_out.py's)"),
    *(CorpusModel(f"{ours}-{seed}", ours, _app(enas, family, seed),
                  f"member {seed} of the ENAS-like {family} family (examples:{family}-{seed})",
                  families.VERSION)
      for family, ours in ENAS_FAMILIES.items() for seed in (0, 1)),
)
MODELS = {m.name: m for m in ENTRIES}


def families_of() -> dict:
    """{family: its models' names}, in MODELS' order."""
    grouped = {}
    for model in MODELS.values():
        grouped.setdefault(model.family, []).append(model.name)
    return grouped
