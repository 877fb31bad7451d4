"""The Placeto graph-embedding network as a TF-Agents DistributionNetwork.

Observation (see specs) -> a categorical distribution over devices for the group being placed:
1. a per-group transform of the features (d -> d);
2. `rounds` of message passing, separately from parents (forward) and from children
   (backward): h <- mask * norm(g(mean over neighbours of f(h)) + s(h)); the two results are
   concatenated (2d per group);
3. three poolings over the groups related to the current one, each g(mean of f(h)): its
   ancestors, its descendants, and the groups with no path to or from it (parallel);
4. [ancestors, descendants, parallel, own embedding] (8d) -> 16d -> 8d -> device logits,
   devices that are absent or lack a kernel for the group masked out.
Means (not the paper's sums) and a layer norm per round keep activations, and so the first
logits, small on graphs of a hundred groups: summed, they grow with every round until the
untrained policy is already certain, and REINFORCE never explores.
Nothing identifies a group but its features and its place in the graph: that is what lets a
trained network place graphs it has never seen.

This module loads TF-Agents and TensorFlow when it is imported.
"""

from __future__ import annotations

from tf_placeto.policy import require_tf_agents, specs

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

import tensorflow as tf
import tensorflow_probability as tfp
from tf_agents.networks import network, utils
from tf_agents.specs import distribution_spec, tensor_spec
from tf_agents.utils import nest_utils

_MASKED_LOGIT = -1e9


def _dense(units, activation="relu", name=None):
    return tf.keras.layers.Dense(units, activation=activation, name=name)


class _Body(tf.keras.layers.Layer):
    """Observation -> [ancestors, descendants, parallel, own] pooled embeddings (8d)."""

    def __init__(self, embedding, rounds, **kwargs):
        super().__init__(**kwargs)
        d = embedding
        self._rounds = rounds
        self._transform = [_dense(d, name="transform_1"), _dense(d, name="transform_2")]
        self._passes = {
            direction: (_dense(d, name=f"{direction}_f"), _dense(d, name=f"{direction}_g"),
                        _dense(d, activation=None, name=f"{direction}_self"),
                        tf.keras.layers.LayerNormalization(name=f"{direction}_norm"))
            for direction in ("forward", "backward")}
        self._pools = {kind: (_dense(2 * d, name=f"{kind}_f"), _dense(2 * d, name=f"{kind}_g"))
                       for kind in ("ancestors", "descendants", "parallel")}

    def call(self, observation):
        mask = observation["node_mask"][..., None]                      # [B, N, 1]
        adjacency = tf.cast(observation["adjacency"], tf.float32)       # [B, N, N]: i -> j
        h = observation["features"]
        for layer in self._transform:
            h = layer(h)
        h = h * mask
        forward = self._message_passing(h, tf.linalg.matrix_transpose(adjacency), mask,
                                        self._passes["forward"])
        backward = self._message_passing(h, adjacency, mask, self._passes["backward"])
        embedded = tf.concat([forward, backward], axis=-1)              # [B, N, 2d]
        current = observation["features"][..., specs.CURRENT][..., None]
        ancestors = observation["ancestors"][..., None]
        descendants = observation["descendants"][..., None]
        parallel = mask * (1.0 - ancestors - descendants - current)
        pooled = [self._pool(embedded, members, self._pools[kind]) for kind, members in
                  (("ancestors", ancestors), ("descendants", descendants),
                   ("parallel", parallel))]
        own = tf.reduce_sum(embedded * current, axis=-2)
        return tf.concat(pooled + [own], axis=-1)                        # [B, 8d]

    def _message_passing(self, h, incoming, mask, layers):
        """incoming[i, j] = 1 when j sends to i: each round averages what i's neighbours
        say."""
        f, g, keep, norm = layers
        mean = incoming / tf.maximum(tf.reduce_sum(incoming, axis=-1, keepdims=True), 1.0)
        for _ in range(self._rounds):
            h = mask * norm(g(tf.matmul(mean, f(h))) + keep(h))
        return h

    @staticmethod
    def _pool(embedded, members, layers):
        f, g = layers
        count = tf.maximum(tf.reduce_sum(members, axis=-2), 1.0)
        return g(tf.reduce_sum(members * f(embedded), axis=-2) / count)


def _squashed(net, observation, head):
    """Apply `head` to observations with any outer (batch, time) dimensions."""
    squash = utils.BatchSquash(nest_utils.get_outer_rank(observation, net.input_tensor_spec))
    return squash.unflatten(head(tf.nest.map_structure(squash.flatten, observation)))


class PlacetoNetwork(network.DistributionNetwork):
    """The policy: observation -> Categorical over devices."""

    def __init__(self, observation_spec, action_spec, embedding: int = 32, rounds: int = 8,
                 name: str = "PlacetoNetwork"):
        n_devices = int(action_spec.maximum - action_spec.minimum + 1)
        output_spec = distribution_spec.DistributionSpec(
            tfp.distributions.Categorical,
            {"logits": tensor_spec.TensorSpec([n_devices], tf.float32)},
            sample_spec=action_spec, dtype=action_spec.dtype)
        super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                         output_spec=output_spec, name=name)
        d = embedding
        self._body = _Body(embedding, rounds, name="body")
        self._classifier = [
            _dense(16 * d, name="classify_1"), _dense(8 * d, name="classify_2"),
            tf.keras.layers.Dense(n_devices, name="logits",   # small: a first policy near
                                  kernel_initializer=tf.keras.initializers.VarianceScaling(
                                      0.1))]                  # uniform explores

    def call(self, observation, step_type=None, network_state=(), training=False):
        return tfp.distributions.Categorical(
            logits=_squashed(self, observation, self._logits)), network_state

    def _logits(self, observation):
        z = self._body(observation)
        for layer in self._classifier:
            z = layer(z)
        return z + (1.0 - observation["device_mask"]) * _MASKED_LOGIT


class PlacetoValueNetwork(network.Network):
    """PPO's critic: the same embedding (its own weights) -> the expected return."""

    def __init__(self, observation_spec, embedding: int = 32, rounds: int = 8,
                 name: str = "PlacetoValueNetwork"):
        super().__init__(input_tensor_spec=observation_spec, state_spec=(), name=name)
        self._body = _Body(embedding, rounds, name="body")
        self._head = [_dense(8 * embedding, name="value_1"),
                      _dense(1, activation=None, name="value")]

    def call(self, observation, step_type=None, network_state=(), training=False):
        return _squashed(self, observation, self._value), network_state

    def _value(self, observation):
        z = self._body(observation)
        for layer in self._head:
            z = layer(z)
        return z[..., 0]
