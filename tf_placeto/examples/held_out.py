"""Real models kept apart from the bundled graphs: the placers were never tuned on them.

The models users reported `place` making slower, recurrent layers (`lstm`, `gru`: Keras'
implementation-selector functions, which TensorFlow does not inline), and a control,
`branches` (independent chains, which do gain from two devices). Each is served with a
`serving_default` signature of fixed-shape inputs, batch included, random weights drawn from
fixed seeds. They are not in the `examples:` registry: the benchmarks build and cache them
(measure/real_models.py), and tests build small ones with `save(name, path, **options)`.
"""

from __future__ import annotations

import dataclasses

SIGNATURE = "serving_default"


def _fresh_keras():
    """tf-keras with a cleared session and every seed set: weights and names repeat."""
    from tf_placeto.examples.models import fresh_keras  # heavy: imports TensorFlow

    return fresh_keras(seed=0)


def serving(function, *specs):
    """A tf.Module whose `serve` runs `function` on inputs of exactly `specs` ((shape, dtype))."""
    import tensorflow as tf  # heavy: loaded by the builders only

    module = tf.Module()
    module.serve = tf.function(function, input_signature=[
        tf.TensorSpec(shape, dtype, name=f"input_{k}") for k, (shape, dtype) in enumerate(specs)])
    return module


def keras_serving(model, *inputs):
    """Serve a Keras model on fixed `inputs` ((shape, dtype), one per model input); the Keras
    model itself stays untracked (saving a tracked one traces every layer again for Keras'
    reloading), its weights are kept."""
    module = serving(lambda *x: {"output": model(x[0] if len(x) == 1 else list(x),
                                                 training=False)}, *inputs)
    module.model_variables = list(model.variables)
    return module


def keras_inference(model, batch_size: int, dtype: str = "float32"):
    """Serve a Keras model of one input on one fixed batch."""
    return keras_serving(model, ((batch_size, *model.input_shape[1:]), dtype))


def _weights(*shape):
    """Normal values of variance 1/fan-in: a chain of matmuls keeps its activations' scale."""
    import tensorflow as tf  # heavy: loaded by the builders only

    return tf.Variable(tf.random.normal(shape, stddev=shape[0] ** -0.5))


def resnet50():
    keras = _fresh_keras()
    return keras_inference(keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3)), 8)


def mobilenet_v2():
    keras = _fresh_keras()
    return keras_inference(
        keras.applications.MobileNetV2(weights=None, input_shape=(96, 96, 3)), 8)


def transformer(blocks: int = 2, seq: int = 64, d_model: int = 128, heads: int = 4):
    keras = _fresh_keras()
    layers = keras.layers
    inputs = keras.Input((seq, d_model))
    x = inputs
    for _ in range(blocks):
        attended = layers.MultiHeadAttention(heads, d_model // heads)(x, x)
        x = layers.LayerNormalization()(x + attended)
        hidden = layers.Dense(4 * d_model, activation="relu")(x)
        x = layers.LayerNormalization()(x + layers.Dense(d_model)(hidden))
    return keras_inference(keras.Model(inputs, x), 8)


def train_step():
    """One SGD-with-momentum step of a small CNN, the loss returned: the bundled examples'
    TrainingStep, on a plain convolutional stack of its own."""
    from tf_placeto.examples.models import classifier_step  # heavy: imports TensorFlow

    keras = _fresh_keras()
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)])
    module = classifier_step(model, 32, (32, 32, 3))
    module.serve = module.train_step
    return module


def control_flow(size: int = 256, iterations: int = 8):
    """tf.cond picks one of two matmuls, then tf.while_loop multiplies `iterations` times:
    raw control flow, no Autograph."""
    import tensorflow as tf  # heavy: loaded by the builders only

    _fresh_keras()
    first, second = _weights(size, size), _weights(size, size)

    def serve(x):
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: tf.matmul(x, first),
                    lambda: tf.matmul(x, second))
        _, y = tf.while_loop(lambda i, y: i < iterations,
                             lambda i, y: (i + 1, tf.tanh(tf.matmul(y, first))),
                             (tf.constant(0), y))
        return {"output": y}

    module = serving(serve, ((size, size), tf.float32))
    module.model_variables = [first, second]
    return module


def lookup(vocabulary: int = 1000, batch_size: int = 32, tokens: int = 16, width: int = 64):
    """Words -> ids in a StaticHashTable (unknown words: id `vocabulary`), mean embedding,
    dense layer."""
    import tensorflow as tf  # heavy: loaded by the builders only

    _fresh_keras()
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([f"w{k}" for k in range(vocabulary)]), tf.range(vocabulary, dtype=tf.int64)),
        default_value=vocabulary)
    embedding, dense = _weights(vocabulary + 1, width), _weights(width, 10)

    def serve(words):
        vectors = tf.nn.embedding_lookup(embedding, table.lookup(words))
        return {"output": tf.matmul(tf.reduce_mean(vectors, axis=1), dense)}

    module = serving(serve, ((batch_size, tokens), tf.string))
    module.table = table
    module.model_variables = [embedding, dense]
    return module


def lstm(vocabulary: int = 5000, seq: int = 32):
    keras = _fresh_keras()
    return _recurrent(keras, keras.layers.LSTM(128), vocabulary, seq)


def gru(vocabulary: int = 5000, seq: int = 32):
    keras = _fresh_keras()
    return _recurrent(keras, keras.layers.Bidirectional(keras.layers.GRU(64)), vocabulary, seq)


def _recurrent(keras, layer, vocabulary: int, seq: int):
    """A text model: word ids -> Embedding -> `layer` -> Dense, served on batches of 16."""
    model = keras.Sequential([keras.Input((seq,), dtype="int32"),
                              keras.layers.Embedding(vocabulary, 64), layer,
                              keras.layers.Dense(10)])
    return keras_inference(model, 16, dtype="int32")


def branches(count: int = 4, chain: int = 4, size: int = 512):
    """`count` chains of `chain` matmuls, each on its own slice of the input, summed at the end."""
    import tensorflow as tf  # heavy: loaded by the builders only

    _fresh_keras()
    weights = [[_weights(size, size) for _ in range(chain)] for _ in range(count)]

    def serve(x):
        ends = []
        for k, chain_weights in enumerate(weights):
            y = x[k]
            for w in chain_weights:
                y = tf.tanh(tf.matmul(y, w))
            ends.append(y)
        return {"output": tf.add_n(ends)}

    module = serving(serve, ((count, size, size), tf.float32))
    module.model_variables = [w for chain_weights in weights for w in chain_weights]
    return module


@dataclasses.dataclass(frozen=True)
class RealModel:
    name: str
    builder: object       # () -> a tf.Module with a `serve` tf.function; None: a bundled example
    description: str
    version: int = 1      # bump when the builder changes: the cache key includes it


MODELS = {m.name: m for m in [
    RealModel("resnet50", resnet50, "ResNet50 inference, batch 8 of 64x64x3"),
    RealModel("mobilenet_v2", mobilenet_v2, "MobileNetV2 inference, batch 8 of 96x96x3"),
    RealModel("transformer", transformer,
              "two encoder blocks (attention, FFN, LayerNorm), batch 8, seq 64, d_model 128"),
    RealModel("train_step", train_step,
              "one SGD-momentum training step of a small CNN, batch 32 of 32x32x3"),
    RealModel("control_flow", control_flow,
              "tf.cond + tf.while_loop over 256x256 matmuls, 8 turns"),
    RealModel("lookup", lookup, "string StaticHashTable lookup + embedding + dense, batch 32x16"),
    RealModel("lstm", lstm, "Embedding + LSTM(128) + Dense, batch 16, seq 32 (recurrent)"),
    RealModel("gru", gru, "Embedding + Bidirectional(GRU(64)) + Dense, batch 16, seq 32"),
    RealModel("branches", branches, "four independent chains of 4 matmuls 512x512, summed"),
    RealModel("inception_v3", None, "the bundled examples:inception_v3 training step"),
]}


def save(name: str, out: str, **builder_options) -> None:
    """Build the model (its builder's options: smaller sizes for tests) and save it with its
    `serving_default` signature (in the child)."""
    import tensorflow as tf  # heavy: loaded by the builders only

    module = MODELS[name].builder(**builder_options)
    tf.saved_model.save(module, out, signatures={SIGNATURE: module.serve})
