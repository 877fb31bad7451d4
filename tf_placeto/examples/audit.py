"""Real models that nothing is trained on or chosen by: the audit set.

The corpus's held-out families (measure/bench_generalisation.py) judge every policy trained
here, and each choice of recipe was made on their figures, so they are no longer unseen in
the sense that matters. The audit set stands apart: its families are none of the corpus's,
its profiles live in their own folder (PROFILES), which `tf-placeto train --graphs corpus`
never reads, and no decision is taken on its figures: a policy is judged on it once it has
been chosen (`bench_generalisation --judge audit`).

Each builder returns a tf.Module whose `serve` tf.function has a fixed input signature, as
the corpus's do (held_out.py's helpers); measure/build_corpus.py --audit profiles them.
"""

from __future__ import annotations

import functools
import os

from tf_placeto.examples import held_out
from tf_placeto.examples.corpus import CorpusModel, adam_step, application

PROFILES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "audit_profiles")


def unet(image_size: int = 64, widths=(16, 32, 64), batch_size: int = 2):
    """A U-Net serving a segmentation map: a convolution pair per level on the way down
    (max-pooled), a transposed convolution per level on the way up, each concatenated with
    the level's skip connection."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    inputs = keras.Input((image_size, image_size, 3))
    x, skips = inputs, []
    for width in widths:
        x = layers.Conv2D(width, 3, padding="same", activation="relu")(x)
        x = layers.Conv2D(width, 3, padding="same", activation="relu")(x)
        skips.append(x)
        x = layers.MaxPooling2D()(x)
    x = layers.Conv2D(2 * widths[-1], 3, padding="same", activation="relu")(x)
    for width, skip in zip(reversed(widths), reversed(skips)):
        x = layers.Conv2DTranspose(width, 2, strides=2, padding="same")(x)
        x = layers.Concatenate()([x, skip])
        x = layers.Conv2D(width, 3, padding="same", activation="relu")(x)
    return held_out.keras_inference(keras.Model(inputs, layers.Conv2D(4, 1)(x)), batch_size)


def wavenet(layers_: int = 12, channels: int = 32, length: int = 256, batch_size: int = 4):
    """A WaveNet-like stack serving next-sample logits: causal convolutions dilated 1, 2, 4,
    ... (reset every 6 layers), gated (tanh times sigmoid), each with a residual connection
    and a skip output, the skips summed."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    inputs = keras.Input((length, 1))
    x = layers.Conv1D(channels, 2, padding="causal")(inputs)
    skips = []
    for k in range(layers_):
        dilation = 2 ** (k % 6)
        gate = layers.Multiply()([
            layers.Conv1D(channels, 2, padding="causal", dilation_rate=dilation,
                          activation="tanh")(x),
            layers.Conv1D(channels, 2, padding="causal", dilation_rate=dilation,
                          activation="sigmoid")(x)])
        skips.append(layers.Conv1D(channels, 1)(gate))
        x = layers.Add()([x, layers.Conv1D(channels, 1)(gate)])
    out = layers.Conv1D(256, 1)(layers.ReLU()(layers.Add()(skips)))
    return held_out.keras_inference(keras.Model(inputs, out), batch_size)


def mixture_of_experts(experts: int = 4, width: int = 128, hidden: int = 256,
                       classes: int = 10, batch_size: int = 64):
    """One Adam step of a dense mixture of experts: a softmax gate over `experts` two-layer
    MLPs, all run on every example, their outputs weighted by the gate."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    inputs = keras.Input((width,))
    gate = layers.Dense(experts, activation="softmax")(inputs)
    outputs = [layers.Dense(width)(layers.Dense(hidden, activation="relu")(inputs))
               for _ in range(experts)]
    stacked = layers.Lambda(lambda v: keras.backend.stack(v, axis=1))(outputs)
    mixed = layers.Dot(axes=1)([gate, stacked])
    model = keras.Model(inputs, layers.Dense(classes)(mixed))
    return adam_step(model, ((batch_size, width), "float32"), labels=((batch_size,), "int32"))


def two_tower(rows: int = 5_000, width: int = 32, features: int = 4, batch_size: int = 64):
    """One Adam step of a two-tower retrieval model: a user tower and an item tower (each
    `features` embedded ids through an MLP), scored by dot products against every item of the
    batch, the matching item the label (an in-batch softmax)."""
    import tensorflow as tf  # heavy: loaded by the builders only

    keras = held_out._fresh_keras()
    layers = keras.layers

    def tower(ids):
        embedded = layers.Concatenate()([layers.Embedding(rows, width)(ids[:, k])
                                         for k in range(features)])
        return layers.Dense(width)(layers.Dense(128, activation="relu")(embedded))

    users = keras.Input((features,), dtype="int32")
    items = keras.Input((features,), dtype="int32")
    scores = layers.Lambda(lambda t: tf.matmul(t[0], t[1], transpose_b=True))(
        [tower(users), tower(items)])
    model = keras.Model([users, items], scores)
    return adam_step(model, ((batch_size, features), "int32"),
                     ((batch_size, features), "int32"), labels=((batch_size,), "int32"))


def siamese(image_size: int = 48, batch_size: int = 8):
    """A siamese network serving a match score: one convolutional tower, the same weights,
    over two images; the absolute difference of their embeddings through a dense layer."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    tower = keras.Sequential([
        keras.Input((image_size, image_size, 3)),
        layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.GlobalAveragePooling2D(),
        layers.Dense(64)])
    left = keras.Input((image_size, image_size, 3))
    right = keras.Input((image_size, image_size, 3))
    distance = layers.Lambda(lambda t: abs(t[0] - t[1]))([tower(left), tower(right)])
    image = ((batch_size, image_size, image_size, 3), "float32")
    model = keras.Model([left, right], layers.Dense(1)(distance))
    return held_out.keras_serving(model, image, image)


def seq2seq(vocabulary: int = 2_000, units: int = 64, source: int = 24, target: int = 16,
            batch_size: int = 16):
    """An LSTM encoder-decoder with dot-product attention serving next-token logits (teacher
    forcing): the encoder's sequence and final state, the decoder started from that state,
    each decoder step attending over the encoder's outputs."""
    keras = held_out._fresh_keras()
    layers = keras.layers
    source_ids = keras.Input((source,), dtype="int32")
    target_ids = keras.Input((target,), dtype="int32")
    encoded, state_h, state_c = layers.LSTM(units, return_sequences=True, return_state=True)(
        layers.Embedding(vocabulary, units)(source_ids))
    decoded = layers.LSTM(units, return_sequences=True)(
        layers.Embedding(vocabulary, units)(target_ids), initial_state=[state_h, state_c])
    context = layers.Attention()([decoded, encoded])
    logits = layers.Dense(vocabulary)(layers.Concatenate()([decoded, context]))
    return held_out.keras_serving(keras.Model([source_ids, target_ids], logits),
                                  ((batch_size, source), "int32"),
                                  ((batch_size, target), "int32"))


FAMILIES = {
    "unet": "encoder-decoder convolutions with skip connections across levels",
    "wavenet": "gated dilated causal convolutions with residual and skip sums",
    "mixture_of_experts": "parallel expert MLPs weighted by a softmax gate",
    "two_tower": "two embedding towers scored against each other",
    "siamese": "one tower, shared weights, over two inputs",
    "seq2seq": "an LSTM encoder-decoder with attention",
    "convnext": "ConvNeXt: depthwise convolutions, LayerNorm and inverted MLPs",
}
ENTRIES = (
    CorpusModel("unet", "unet", unet,
                "U-Net inference, 3 levels of 16/32/64 channels, batch 2 of 64x64x3"),
    CorpusModel("wavenet", "wavenet", wavenet,
                "12 gated dilated causal layers of 32 channels, batch 4 of 256 samples"),
    CorpusModel("moe_adam_step", "mixture_of_experts", mixture_of_experts,
                "one Adam step of a softmax-gated mixture of 4 MLP experts, batch 64"),
    CorpusModel("two_tower_adam_step", "two_tower", two_tower,
                "one Adam step of a two-tower retrieval model, in-batch softmax, two towers of 4 "
                "tables of 5,000 x 32 each, batch 64"),
    CorpusModel("siamese", "siamese", siamese,
                "a siamese CNN's match score, batch 8 of two 48x48x3 images"),
    CorpusModel("seq2seq_attention", "seq2seq", seq2seq,
                "LSTM(64) encoder-decoder with dot-product attention, batch 16, source 24, "
                "target 16"),
    CorpusModel("convnext_tiny", "convnext",
                functools.partial(application, "ConvNeXtTiny", 32),
                "ConvNeXt-Tiny inference, batch 2 of 32x32x3"),
)
MODELS = {m.name: m for m in ENTRIES}
