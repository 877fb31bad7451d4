"""The hierarchical planner's networks (rnn_planner.py) as one tf.Module: the grouper and the
sequence-to-sequence placer, with REINFORCE updates.

Built on TensorFlow's core only (tf.Module, variables, tf.function, stateless random ops): no
Keras layer, so it runs under whichever Keras the process chose, and one seed gives one result.
This module loads TensorFlow when it is imported; rnn_planner.py imports it when a search starts.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

HIDDEN = 64                 # LSTM units (the paper: 512)
GROUPER_HIDDEN = 64         # the grouper's hidden layer (the paper's grouping_hidden_size)
CHUNK_PRIOR = 4.0           # grouper logit lost per planner group away from the unit's chunk
LOGIT_BOUND = 3.0           # device logits are LOGIT_BOUND * tanh(.) (the paper's tanh_constant)
GRADIENT_BOUND = 1.0        # global gradient norm clipped to this (the paper's grad_bound)
FORGET_BIAS = 1.0


class Planner(tf.Module):
    """The grouper (into `k` planner groups) and the placer, with a compiled `sample` and
    `update` for batches of `batch` samples."""

    def __init__(self, units, k: int, n_devices: int, batch: int, learning_rate: float,
                 seed: int):
        """units: rnn_planner.Units of the problem."""
        super().__init__(name="hierarchical_planner")
        n_units = len(units.inputs)
        chunk = np.arange(n_units) * k // n_units
        self.chunk_logits = tf.constant(-CHUNK_PRIOR * np.abs(chunk[:, None] - np.arange(k)),
                                        tf.float32)
        self.inputs, self.shares = tf.constant(units.inputs), tf.constant(units.shares)
        self.edge_src, self.edge_dst = tf.constant(units.edge_src), tf.constant(units.edge_dst)
        self.edge_share = tf.constant(units.edge_bytes / max(units.edge_bytes.sum(), 1.0))
        self.n_units, self.k, self.n_devices, self.batch = n_units, k, n_devices, batch
        h, half = HIDDEN, HIDDEN // 2
        embedding = units.inputs.shape[1] + units.shares.shape[1] + 2 * k
        shapes = {"grouper_hidden": (units.inputs.shape[1], GROUPER_HIDDEN),
                  "grouper_softmax": (GROUPER_HIDDEN, k),
                  "encoder_forward": (embedding + half, 4 * half),
                  "encoder_backward": (embedding + half, 4 * half),
                  "decoder": (3 * h, 4 * h),
                  "device_embeddings": (n_devices + 1, h),      # the last one: "go"
                  "attention_memory": (h, h), "attention_query": (h, h),
                  "attention_v": (h, 1), "device_softmax": (2 * h, n_devices)}
        self.w = {name: tf.Variable(_glorot(shape, (seed, i)), name=name)
                  for i, (name, shape) in enumerate(shapes.items())}
        self.b = {name: tf.Variable(tf.zeros(shapes[name][1]), name=f"{name}_bias")
                  for name in ("grouper_hidden", "encoder_forward", "encoder_backward",
                               "decoder")}
        self.optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate)

    def grouper_log_probs(self):
        hidden = tf.tanh(self.inputs @ self.w["grouper_hidden"] + self.b["grouper_hidden"])
        return tf.nn.log_softmax(hidden @ self.w["grouper_softmax"] + self.chunk_logits)

    def embed(self, grouping):
        """[batch, K, embedding] from planner groups [batch, n]: the share of the graph's
        compute, bytes, memory and units in each and the share of the graph's bytes it
        sends to and receives from every planner group (all times K), its units' mean
        input."""
        k, batch = self.k, self.batch
        member = tf.one_hot(grouping, k)                               # [batch, n, K]
        count = tf.reduce_sum(member, axis=1)[..., None]
        totals = tf.einsum("bnk,ns->bks", member, self.shares)
        means = tf.einsum("bnk,nf->bkf", member, self.inputs) / tf.maximum(count, 1.0)
        cell = (tf.range(batch)[:, None] * k * k
                + tf.gather(grouping, self.edge_src, axis=1) * k
                + tf.gather(grouping, self.edge_dst, axis=1))
        sent = tf.reshape(tf.math.unsorted_segment_sum(
            tf.tile(self.edge_share[None], [batch, 1]), cell, batch * k * k),
            [batch, k, k])
        return tf.concat([k * totals, k * sent,
                          k * tf.transpose(sent, [0, 2, 1]), means], axis=2)

    def encode(self, embedded):
        """Bidirectional LSTM over the planner groups: (its states [batch, K, h] as
        attention keys, final c, final h)."""
        steps = tf.transpose(embedded, [1, 0, 2])
        zero = tf.zeros([self.batch, HIDDEN // 2])

        def step(state, signals):
            cf, hf, cb, hb = state
            cf, hf = self.lstm("encoder_forward", signals[0], cf, hf)
            cb, hb = self.lstm("encoder_backward", signals[1], cb, hb)
            return cf, hf, cb, hb

        cf, hf, cb, hb = tf.scan(step, (steps, tf.reverse(steps, [0])),
                                 initializer=(zero, zero, zero, zero))
        states = tf.transpose(tf.concat([hf, tf.reverse(hb, [0])], axis=2), [1, 0, 2])
        return (states @ self.w["attention_memory"], tf.concat([cf[-1], cb[-1]], axis=1),
                tf.concat([hf[-1], hb[-1]], axis=1))

    def decode(self, memory, c, h, per_step, choose):
        """Devices for the K planner groups in turn, each step fed the device chosen
        before and the group's encoder state, attending over all of them: (devices, log
        probabilities), [K, batch]. choose(logits, per_step[t]) picks a step's devices."""

        def step(state, inputs):
            c, h, previous, _ = state
            given, current = inputs
            c, h = self.lstm("decoder", tf.concat(
                [tf.gather(self.w["device_embeddings"], previous), current], axis=1), c, h)
            query = (h @ self.w["attention_query"])[:, None, :]
            scores = tf.squeeze(tf.tanh(memory + query) @ self.w["attention_v"], axis=2)
            context = tf.reduce_sum(tf.nn.softmax(scores)[..., None] * memory, axis=1)
            logits = LOGIT_BOUND * tf.tanh(
                tf.concat([h, context], axis=1) @ self.w["device_softmax"])
            chosen = choose(logits, given)
            return c, h, chosen, -tf.nn.sparse_softmax_cross_entropy_with_logits(chosen,
                                                                                 logits)

        go = tf.fill([self.batch], self.n_devices)
        _, _, devices, log_probs = tf.scan(
            step, (per_step, tf.transpose(memory, [1, 0, 2])),
            initializer=(c, h, go, tf.zeros([self.batch])))
        return devices, log_probs

    def lstm(self, name, signal, c, h):
        gates = tf.concat([signal, h], axis=1) @ self.w[name] + self.b[name]
        i, f, o, g = tf.split(gates, 4, axis=1)
        c = tf.sigmoid(i) * tf.tanh(g) + tf.sigmoid(f + FORGET_BIAS) * c
        return c, tf.sigmoid(o) * tf.tanh(c)

    @tf.function
    def sample(self, seed):
        """A batch of (planner group per unit [batch, n], device per planner group
        [batch, K]), drawn with the stateless seed [2]."""
        seeds = tf.random.experimental.stateless_split(seed, self.k + 1)

        def draw(logits, step_seed):
            return tf.random.stateless_categorical(logits, 1, step_seed, dtype=tf.int32)

        logits = tf.tile(self.grouper_log_probs(), [self.batch, 1])
        grouping = tf.reshape(draw(logits, seeds[0]), [self.batch, self.n_units])
        memory, c, h = self.encode(self.embed(grouping))
        devices, _ = self.decode(memory, c, h, seeds[1:],
                                 lambda logits, step_seed: draw(logits, step_seed)[:, 0])
        return grouping, tf.transpose(devices)

    @tf.function
    def update(self, grouping, devices, advantages):
        """One REINFORCE step on a batch of samples and their advantages."""
        with tf.GradientTape() as tape:
            grouping_log_prob = tf.reduce_sum(
                tf.one_hot(grouping, self.k) * self.grouper_log_probs(), axis=[1, 2])
            memory, c, h = self.encode(self.embed(grouping))
            _, log_probs = self.decode(memory, c, h, tf.transpose(devices),
                                       lambda logits, given: given)
            log_prob = grouping_log_prob + tf.reduce_sum(log_probs, axis=0)
            loss = -tf.reduce_mean(advantages * log_prob)
        variables = self.trainable_variables
        gradients, _ = tf.clip_by_global_norm(tape.gradient(loss, variables),
                                              GRADIENT_BOUND)
        self.optimizer.apply_gradients(zip(gradients, variables))



def _glorot(shape, seed):
    limit = np.sqrt(6.0 / (shape[0] + shape[1]))
    return tf.random.stateless_uniform(shape, seed, -limit, limit)


