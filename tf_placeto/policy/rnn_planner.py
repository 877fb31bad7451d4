"""The hierarchical planner of Mirhoseini et al. (ICLR 2018), learned afresh on each graph.

A grouper, a feed-forward network with a softmax over K planner groups, puts each unit in a
planner group; a sequence-to-sequence LSTM with attention reads the planner groups' embeddings
and names a device for each; every unit goes where its planner group goes. The units are the
groups of the PlacementProblem (colocation already holds inside them) and
K = min(units, 20 x devices, 256), as in the paper. Both networks learn together with
REINFORCE: the reward of a sampled placement is -sqrt(objective), the baseline an exponential
moving average of the reward, the logits of the device softmax are bounded with tanh and the
gradient's norm is clipped, as in the paper. The objective is Placeto's
(tf_placeto.policy.environment.Objective: simulated step time plus a memory penalty), so that
the two learned placers are judged alike and counted alike: one evaluation, one simulation.
Nothing transfers between graphs, as in the paper.

The paper trained for hours; to learn within hundreds of placements it differs in three ways:
- the grouper starts from contiguous chunks of the topological order (a fixed term in its
  logits), not from a uniform draw, which would give each sample unrelated planner groups and
  the placer nothing to learn;
- each decoder step reads, besides the device chosen before, the encoder's state of the planner
  group it places, so that it need not find that group by attention alone;
- advantages are divided by a moving average of their spread, so that the learning rate means
  the same on every graph, and the networks are smaller (64 LSTM units, not 512).

Built on TensorFlow's core only (tf.Module, variables, tf.function, stateless random ops): no
Keras layer, so it runs under whichever Keras the process chose, and one seed gives one result.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_placeto.placers.common import mean_compute_us
from tf_placeto.placers.objectives import chain_heads
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy.environment import Objective, single_device

BUDGET = 400                # placements sampled and simulated, by default
BATCH = 8                   # samples per update
LEARNING_RATE = 0.001       # Adam's (the paper: 0.1, for far longer runs)
HIDDEN = 64                 # LSTM units (the paper: 512)
GROUPER_HIDDEN = 64         # the grouper's hidden layer (the paper's grouping_hidden_size)
CHUNK_PRIOR = 4.0           # grouper logit lost per planner group away from the unit's chunk
LOGIT_BOUND = 3.0           # device logits are LOGIT_BOUND * tanh(.) (the paper's tanh_constant)
BASELINE_DECAY = 0.9        # of the reward's moving average (the paper's bl_dec)
GRADIENT_BOUND = 1.0        # global gradient norm clipped to this (the paper's grad_bound)
FORGET_BIAS = 1.0


def planner_groups(problem: PlacementProblem) -> int:
    """K: the paper's min(256, 20 x devices), and no more than there are units."""
    return min(problem.n_groups, 20 * problem.n_devices, 256)


@dataclasses.dataclass
class Units:
    """What the networks know of the units (the problem's groups), computed once."""

    inputs: np.ndarray      # [n, f] the grouper's input, each column in [0, 1]: compute, bytes
                            # sent, bytes received, memory, topological position, depth, op mix
    shares: np.ndarray      # [n, 5] fractions of the graph's compute, sent, received, memory, units
    edge_src: np.ndarray    # forward and feedback edges with their bytes
    edge_dst: np.ndarray
    edge_bytes: np.ndarray

    @classmethod
    def of(cls, problem: PlacementProblem) -> "Units":
        n = problem.n_groups
        src = np.concatenate([problem.edge_src, problem.feedback_src])
        dst = np.concatenate([problem.edge_dst, problem.feedback_dst])
        nbytes = np.concatenate([problem.edge_bytes, problem.feedback_bytes])
        extensive = np.stack([mean_compute_us(problem),
                              np.bincount(src, weights=nbytes, minlength=n),
                              np.bincount(dst, weights=nbytes, minlength=n),
                              problem.memory_bytes, np.ones(n)], axis=1)
        depth = chain_heads(problem, np.ones(len(problem.edge_src)))   # edges to the unit
        inputs = np.concatenate([_scaled(extensive[:, :4], np.max),
                                 _scaled(np.stack([np.arange(n), depth], axis=1), np.max),
                                 _op_mix(problem)], axis=1)
        return cls(inputs=inputs.astype(np.float32),
                   shares=_scaled(extensive, np.sum).astype(np.float32),
                   edge_src=src, edge_dst=dst, edge_bytes=nbytes.astype(np.float32))


def _scaled(columns: np.ndarray, by) -> np.ndarray:
    return columns / np.maximum(by(columns, axis=0), 1e-12)


def _op_mix(problem: PlacementProblem) -> np.ndarray:
    """[n, op types]: the fraction of each unit's ops of each type (the paper's op types)."""
    graph = problem.groups.op_graph
    _, type_of = np.unique([op.type for op in graph.ops], return_inverse=True)
    counts = np.zeros((problem.n_groups, type_of.max(initial=0) + 1))
    np.add.at(counts, (problem.groups.group_of, type_of), 1.0)
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)


def _network(units: Units, k: int, n_devices: int, batch: int, learning_rate: float,
             seed: int):
    """The grouper (into `k` planner groups) and the placer, a tf.Module with a compiled
    `sample` and `update` for batches of `batch` samples (TensorFlow is imported here, on
    first use)."""
    import tensorflow as tf

    n_units = len(units.inputs)
    chunk = np.arange(n_units) * k // n_units
    chunk_logits = tf.constant(-CHUNK_PRIOR * np.abs(chunk[:, None] - np.arange(k)),
                               tf.float32)
    inputs, shares = tf.constant(units.inputs), tf.constant(units.shares)
    edge_src, edge_dst = tf.constant(units.edge_src), tf.constant(units.edge_dst)
    edge_share = tf.constant(units.edge_bytes / max(units.edge_bytes.sum(), 1.0))

    class Planner(tf.Module):
        def __init__(self):
            super().__init__(name="hierarchical_planner")
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
            hidden = tf.tanh(inputs @ self.w["grouper_hidden"] + self.b["grouper_hidden"])
            return tf.nn.log_softmax(hidden @ self.w["grouper_softmax"] + chunk_logits)

        def embed(self, grouping):
            """[batch, K, embedding] from planner groups [batch, n]: the share of the graph's
            compute, bytes, memory and units in each and the share of the graph's bytes it
            sends to and receives from every planner group (all times K), its units' mean
            input."""
            member = tf.one_hot(grouping, k)                               # [batch, n, K]
            count = tf.reduce_sum(member, axis=1)[..., None]
            totals = tf.einsum("bnk,ns->bks", member, shares)
            means = tf.einsum("bnk,nf->bkf", member, inputs) / tf.maximum(count, 1.0)
            cell = (tf.range(batch)[:, None] * k * k
                    + tf.gather(grouping, edge_src, axis=1) * k
                    + tf.gather(grouping, edge_dst, axis=1))
            sent = tf.reshape(tf.math.unsorted_segment_sum(
                tf.tile(edge_share[None], [batch, 1]), cell, batch * k * k),
                [batch, k, k])
            return tf.concat([k * totals, k * sent,
                              k * tf.transpose(sent, [0, 2, 1]), means], axis=2)

        def encode(self, embedded):
            """Bidirectional LSTM over the planner groups: (its states [batch, K, h] as
            attention keys, final c, final h)."""
            steps = tf.transpose(embedded, [1, 0, 2])
            zero = tf.zeros([batch, HIDDEN // 2])

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

            go = tf.fill([batch], n_devices)
            _, _, devices, log_probs = tf.scan(
                step, (per_step, tf.transpose(memory, [1, 0, 2])),
                initializer=(c, h, go, tf.zeros([batch])))
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
            seeds = tf.random.experimental.stateless_split(seed, k + 1)

            def draw(logits, step_seed):
                return tf.random.stateless_categorical(logits, 1, step_seed, dtype=tf.int32)

            logits = tf.tile(self.grouper_log_probs(), [batch, 1])
            grouping = tf.reshape(draw(logits, seeds[0]), [batch, n_units])
            memory, c, h = self.encode(self.embed(grouping))
            devices, _ = self.decode(memory, c, h, seeds[1:],
                                     lambda logits, step_seed: draw(logits, step_seed)[:, 0])
            return grouping, tf.transpose(devices)

        @tf.function
        def update(self, grouping, devices, advantages):
            """One REINFORCE step on a batch of samples and their advantages."""
            with tf.GradientTape() as tape:
                grouping_log_prob = tf.reduce_sum(
                    tf.one_hot(grouping, k) * self.grouper_log_probs(), axis=[1, 2])
                memory, c, h = self.encode(self.embed(grouping))
                _, log_probs = self.decode(memory, c, h, tf.transpose(devices),
                                           lambda logits, given: given)
                log_prob = grouping_log_prob + tf.reduce_sum(log_probs, axis=0)
                loss = -tf.reduce_mean(advantages * log_prob)
            variables = self.trainable_variables
            gradients, _ = tf.clip_by_global_norm(tape.gradient(loss, variables),
                                                  GRADIENT_BOUND)
            self.optimizer.apply_gradients(zip(gradients, variables))

    return Planner()


def _glorot(shape, seed):
    import tensorflow as tf

    limit = np.sqrt(6.0 / (shape[0] + shape[1]))
    return tf.random.stateless_uniform(shape, seed, -limit, limit)


@dataclasses.dataclass
class Search:
    devices: np.ndarray       # the best placement met, a device per group
    objective_us: float       # its objective
    objectives: np.ndarray    # the objective of every placement evaluated, in order
    planner_groups: int       # K


def search(problem: PlacementProblem, budget: int = BUDGET, batch: int = BATCH,
           learning_rate: float = LEARNING_RATE, seed: int = 0) -> Search:
    """Train a fresh planner on `problem` for `budget` sampled placements, `batch` per update
    (Adam at `learning_rate`); the best placement sampled is the answer."""
    if budget < 1 or batch < 1:
        raise ValueError("the budget and the batch are at least 1")
    objective = Objective(problem)
    k = planner_groups(problem)
    planner = _network(Units.of(problem), k, problem.n_devices, batch, learning_rate, seed)
    home = single_device(problem)     # where a unit goes when its planner group's device has
    allowed = problem.allowed         # no kernel for it
    objectives, baseline, spread = [], None, None
    best = (np.inf, home)
    for step in range(-(-budget // batch)):
        grouping, devices = (t.numpy() for t in planner.sample(np.array([seed, step], np.int64)))
        placements = np.take_along_axis(devices, grouping, axis=1)
        placements = np.where(allowed[np.arange(problem.n_groups), placements], placements, home)
        values = [objective(p)[0] for p in placements[:budget - len(objectives)]]
        objectives += values
        if min(values) < best[0]:
            best = (min(values), placements[int(np.argmin(values))])
        if len(objectives) == budget:
            break                      # an update now would serve no further sample
        rewards = -np.sqrt(np.array(values) / objective.single_us)
        if baseline is None:
            baseline, spread = rewards.mean(), max(rewards.var(), 1e-12)
        advantages = rewards - baseline
        spread = BASELINE_DECAY * spread + (1 - BASELINE_DECAY) * np.mean(advantages ** 2)
        planner.update(grouping, devices, (advantages / np.sqrt(spread)).astype(np.float32))
        baseline = BASELINE_DECAY * baseline + (1 - BASELINE_DECAY) * rewards.mean()
    return Search(devices=best[1], objective_us=float(best[0]),
                  objectives=np.array(objectives), planner_groups=k)
