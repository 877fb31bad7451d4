"""Graph families: seeded random architectures, as Placeto trained and tested on.

Placeto's generalisation results use three families of 32 graphs each found by architecture
search (ENAS): cifar10 (CNN cells), ptb (recurrent cells) and nmt (seq2seq). Their graphs were
never published in a usable form, so these are drawn from ENAS-like search spaces instead.
Member K of a family is drawn from random.Random(K), so it is the same graph on every machine;
its training step is a real one (forward, backward, SGD-momentum update), small enough to build
in seconds. Sampling is plain Python: TensorFlow is imported only to build.
"""

from __future__ import annotations

import dataclasses
import random

SIZE = 32          # members per family, seeds 0 .. SIZE - 1
VERSION = 1        # bump when sampling or building changes: the registry's cache key has it

CNN_OPS = ("conv3x3", "conv5x5", "sep_conv3x3", "sep_conv5x5", "avg_pool", "max_pool",
           "identity")
ACTIVATIONS = ("tanh", "relu", "sigmoid", "identity")


def _loose_ends(readers: list, count: int) -> list:
    """Indices below `count` that no entry of `readers` (lists of read indices) reads."""
    read = {i for inputs in readers for i in inputs}
    return [i for i in range(count) if i not in read]


@dataclasses.dataclass(frozen=True)
class CnnSpec:
    """ENAS micro search space: stages of cells on 32x32x3 images, 10 classes.

    A cell reads the two previous cells' outputs (states 0 and 1); node i adds two ops, each
    applied to an earlier state (its cell inputs or nodes 0 .. i-1). The nodes no node reads
    are concatenated. Each stage after the first starts with a reduction cell (its inputs
    strided by 2, channels doubled).
    """

    seed: int
    channels: int
    stages: int
    cells_per_stage: int
    normal: tuple            # per node: ((input state, op), (input state, op))
    reduction: tuple
    batch_size: int = 8

    def describe(self) -> str:
        return (f"random ENAS-like CNN: {self.stages} stages of {self.cells_per_stage} "
                f"cell(s) ({len(self.normal)}-node normal, {len(self.reduction)}-node "
                f"reduction), {self.channels} channels, batch {self.batch_size}, 32x32x3 "
                f"images, 10 classes")

    def build(self):
        from tf_placeto.examples import models  # heavy: loaded on first use, not with the package

        keras = models.fresh_keras(self.seed)
        layers = keras.layers
        images = keras.Input((32, 32, 3), name="images")
        stem = _relu_conv_bn(layers, images, self.channels, 3, "stem")
        inputs = [stem, stem]
        for stage in range(self.stages):
            for index in range(self.cells_per_stage):
                reduce = stage > 0 and index == 0
                name = f"cell{stage}_{index}"
                output = _cell(layers, inputs, self.reduction if reduce else self.normal,
                               self.channels * 2 ** stage, 2 if reduce else 1, name)
                inputs = [inputs[1], output]
        pooled = layers.GlobalAveragePooling2D(name="pool")(layers.ReLU(name="head_relu")(
            inputs[1]))
        model = keras.Model(images, layers.Dense(10, name="logits")(pooled), name="cifar10")
        return models.classifier_step(model, self.batch_size, (32, 32, 3))


def _relu_conv_bn(layers, x, channels, kernel, name, conv=None, strides=1):
    x = layers.ReLU(name=f"{name}_relu")(x)
    x = (conv or layers.Conv2D)(channels, kernel, strides=strides, padding="same",
                                use_bias=False, name=f"{name}_conv")(x)
    return layers.BatchNormalization(name=f"{name}_bn")(x)


def _cell(layers, inputs, nodes, channels, stride, name):
    """A cell's output: its inputs brought to `channels` at the cell's resolution by
    ReLU-conv1x1-BN, its nodes, and the concatenation of the nodes no node reads."""
    size = inputs[1].shape[1] // stride
    states = [_relu_conv_bn(layers, x, channels, 1, f"{name}_input{i}",
                            strides=x.shape[1] // size) for i, x in enumerate(inputs)]
    for n, node in enumerate(nodes):
        branches = [_node_op(layers, states[source], op, channels, f"{name}_node{n}_{side}")
                    for side, (source, op) in zip("ab", node)]
        states.append(layers.Add(name=f"{name}_node{n}")(branches))
    ends = [states[2 + i] for i in _loose_ends([[s - 2 for s, _ in node] for node in nodes],
                                               len(nodes))]
    return ends[0] if len(ends) == 1 else layers.Concatenate(name=f"{name}_out")(ends)


def _node_op(layers, x, op, channels, name):
    if op == "identity":
        return x
    if op.endswith("pool"):
        pool = layers.AveragePooling2D if op == "avg_pool" else layers.MaxPooling2D
        return pool(3, strides=1, padding="same", name=f"{name}_{op}")(x)
    conv = layers.SeparableConv2D if op.startswith("sep") else layers.Conv2D
    return _relu_conv_bn(layers, x, channels, int(op[-1]), f"{name}_{op}", conv)


def _cnn_cell(rng: random.Random) -> tuple:
    return tuple(tuple((rng.randrange(2 + n), rng.choice(CNN_OPS)) for _ in "ab")
                 for n in range(rng.randint(3, 5)))


def sample_cifar10(seed: int) -> CnnSpec:
    rng = random.Random(seed)
    return CnnSpec(seed, channels=rng.choice((8, 12, 16)), stages=rng.choice((2, 3)),
                   cells_per_stage=rng.choice((1, 2)), normal=_cnn_cell(rng),
                   reduction=_cnn_cell(rng))


@dataclasses.dataclass(frozen=True)
class RnnSpec:
    """ENAS recurrent cell for a PTB language model, unrolled over `steps` tokens.

    Node 0 reads the step's embedded token and the previous state; node i > 0 reads one earlier
    node. Each node is a highway unit, h = s + c * (act(W x) - s) with gate c = sigmoid(W' x)
    and s the node it reads (the previous state for node 0); the cell's output and next state
    is the mean of the nodes no node reads.
    """

    seed: int
    units: int
    steps: int
    nodes: tuple            # per node: (node it reads, activation); node 0's first item is unused
    vocab: int = 10_000
    batch_size: int = 8

    def describe(self) -> str:
        return (f"random ENAS-like RNN language model: {len(self.nodes)}-node cell, "
                f"{self.units} units, unrolled over {self.steps} tokens, batch "
                f"{self.batch_size}, {self.vocab:,}-word vocabulary")

    def build(self):
        from tf_placeto.examples import models  # heavy: loaded on first use, not with the package

        keras = models.fresh_keras(self.seed)
        layers = keras.layers
        tokens = keras.Input((self.steps,), dtype="int32", name="tokens")
        embedded = layers.Embedding(self.vocab, self.units, name="embedding")(tokens)
        units = [_HighwayUnit(layers, self.units, f"node{n}", activation, recurrent=n == 0)
                 for n, (_, activation) in enumerate(self.nodes)]
        ends = _loose_ends([[source] for source, _ in self.nodes[1:]], len(self.nodes))
        state, outputs = None, []
        for t in range(self.steps):
            hidden = [units[0](embedded[:, t], state)]
            for unit, (source, _) in zip(units[1:], self.nodes[1:]):
                hidden.append(unit(hidden[source], hidden[source]))
            state = (hidden[ends[0]] if len(ends) == 1 else
                     layers.Average(name=f"cell_output_{t}")([hidden[i] for i in ends]))
            outputs.append(layers.Reshape((1, self.units), name=f"output_{t}")(state))
        sequence = layers.Concatenate(axis=1, name="outputs")(outputs)
        model = keras.Model(tokens, layers.Dense(self.vocab, name="softmax")(sequence),
                            name="ptb")
        return models.classifier_step(model, self.batch_size, (self.steps,), "int32",
                                      (self.steps,))


class _HighwayUnit:
    """One node of an ENAS recurrent cell, its weights shared by every time step."""

    def __init__(self, layers, units, name, activation, recurrent=False):
        self.layers = layers
        self.gate = layers.Dense(units, name=f"{name}_gate")
        self.value = layers.Dense(units, name=f"{name}_value")
        self.activation = "linear" if activation == "identity" else activation
        self.recurrent = (layers.Dense(units, use_bias=False, name=f"{name}_recurrent_gate"),
                          layers.Dense(units, use_bias=False, name=f"{name}_recurrent_value")
                          ) if recurrent else ()

    def __call__(self, x, skip):
        """h for input x; skip None is the zero state before the first step. A recurrent
        unit (node 0) also projects skip, the previous state, into its gate and value."""
        layers = self.layers
        gate, value = self.gate(x), self.value(x)
        if self.recurrent and skip is not None:
            gate = layers.Add()([gate, self.recurrent[0](skip)])
            value = layers.Add()([value, self.recurrent[1](skip)])
        gate = layers.Activation("sigmoid")(gate)
        value = layers.Activation(self.activation)(value)
        if skip is None:
            return layers.Multiply()([gate, value])
        return layers.Add()([skip, layers.Multiply()([gate, layers.Subtract()([value, skip])])])


def sample_ptb(seed: int) -> RnnSpec:
    rng = random.Random(seed)
    count = rng.randint(4, 8)
    nodes = tuple((rng.randrange(n) if n else 0, rng.choice(ACTIVATIONS)) for n in range(count))
    return RnnSpec(seed, units=rng.choice((32, 48, 64)), steps=rng.choice((8, 10, 12)),
                   nodes=nodes)


@dataclasses.dataclass(frozen=True)
class Seq2SeqSpec:
    """A small attention seq2seq (models.seq2seq): random depth, cell per layer, width,
    lengths, vocabulary and attention."""

    seed: int
    cells: tuple            # "lstm" or "gru" for layer k of both encoder and decoder
    units: int
    source_length: int
    target_length: int
    vocab: int
    attention: str
    batch_size: int = 8

    def describe(self) -> str:
        return (f"random seq2seq: {len(self.cells)}-layer ({'/'.join(self.cells)}) encoder "
                f"and decoder, "
                f"{self.units} units, {self.attention} attention, {self.source_length} source "
                f"and {self.target_length} target tokens, batch {self.batch_size}, "
                f"{self.vocab:,}-word vocabularies")

    def build(self):
        from tf_placeto.examples import models  # heavy: loaded on first use, not with the package

        return models.seq2seq(self.batch_size, self.source_length, self.target_length,
                              self.vocab, self.vocab, self.units, self.cells, self.attention,
                              seed=self.seed)


def sample_nmt_family(seed: int) -> Seq2SeqSpec:
    rng = random.Random(seed)
    cells = tuple(rng.choice(("lstm", "gru")) for _ in range(rng.randint(1, 3)))
    return Seq2SeqSpec(seed, cells, units=rng.choice((32, 64)),
                       source_length=rng.randint(5, 10), target_length=rng.randint(5, 10),
                       vocab=rng.choice((1000, 2000, 4000)),
                       attention=rng.choice(("luong", "bahdanau")))


# family -> (sampler, what its members are)
FAMILIES = {
    "cifar10": (sample_cifar10, "random CNNs of ENAS-like cells, batch 8, 32x32x3 images, "
                                "10 classes (~900-3,200 ops)"),
    "ptb": (sample_ptb, "random ENAS-like RNN cells unrolled over 8-12 tokens, language model "
                        "over 10,000 words, batch 8 (~1,500-3,500 ops)"),
    "nmt_family": (sample_nmt_family, "random 1-3 layer LSTM/GRU seq2seq with attention, "
                                      "unrolled over 5-10 tokens, batch 8 (~800-3,000 ops)"),
}


def sample(family: str, seed: int):
    """The architecture of member `seed` of `family` (a KeyError for an unknown family)."""
    return FAMILIES[family][0](seed)


def build(family: str, seed: int):
    """Member `seed`'s training step."""
    return sample(family, seed).build()
