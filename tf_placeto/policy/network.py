"""The Placeto graph-embedding network, device-equivariant, as a TF-Agents DistributionNetwork.

Observation (see specs) -> a categorical distribution over the devices for the group being
placed:
1. a per-group transform of the features (d -> d);
2. `rounds` of message passing over the edge list, separately from parents (forward) and
   from children (backward): h <- norm(g(mean over neighbours of f(h)) + s(h)), with segment
   sums, so a graph of any size costs its edges, not its size squared; the two results are
   concatenated (2d per group);
3. three poolings over the groups related to the current one, each g(mean of f(h)): its
   ancestors, its descendants, and the groups with no path to or from it (parallel); with
   its own embedding, the context (8d);
4. per device, the mean embedding of the groups on it (2d) and its candidate row (specs);
5. one scorer, the same weights for every device: [context, device's groups, device's row]
   -> 4d -> 2d -> a logit, plus a direct path from the row's simulated step change (one
   trained weight times minus the change: faster devices score higher). The scorer read the
   change too, yet the shipped network went against it where a walk left what it had been
   taught (docs/results/generalisation.md, "A direct path from the step change"); the path
   gives that input a say of its own, in the same units for every graph. Devices without a
   kernel for the group are masked out.
Renaming the devices renames the probabilities and nothing else (equivariance), and one
trained network serves any number of devices. Means and a layer norm per round keep the first
logits small, so that an untrained policy explores.
Nothing identifies a group but its features and its place in the graph: that is what lets a
trained network place graphs it has never seen.

This module loads TF-Agents and TensorFlow when it is imported.
"""

from __future__ import annotations

from typing import Optional

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


def _segment_mean(values, segments, count):
    total = tf.math.unsorted_segment_sum(values, segments, count)
    size = tf.math.unsorted_segment_sum(tf.ones_like(values[:, :1]), segments, count)
    return total / tf.maximum(size, 1.0)


class _Body(tf.keras.layers.Layer):
    """Observations [M, ...] -> (context [M, 8d], per device [M, D, 2d]: its groups' mean)."""

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
        features = observation["features"]                              # [M, N, F]
        batch, n_groups = tf.shape(features)[0], tf.shape(features)[1]
        n_devices = tf.shape(observation["device_mask"])[1]
        h = tf.reshape(features, [-1, specs.NUM_FEATURES])              # [M*N, F]
        for layer in self._transform:
            h = layer(h)
        offset = (tf.range(batch) * n_groups)[:, None]
        src = tf.reshape(observation["edges"][..., 0] + offset, [-1])   # [M*E]
        dst = tf.reshape(observation["edges"][..., 1] + offset, [-1])
        count = batch * n_groups
        forward = self._message_passing(h, src, dst, count, self._passes["forward"])
        backward = self._message_passing(h, dst, src, count, self._passes["backward"])
        flat = tf.concat([forward, backward], axis=-1)                  # [M*N, 2d]
        embedded = tf.reshape(flat, [batch, n_groups, flat.shape[-1]])
        current = features[..., specs.CURRENT][..., None]
        ancestors = observation["ancestors"][..., None]
        descendants = observation["descendants"][..., None]
        parallel = tf.nn.relu(1.0 - ancestors - descendants - current)
        pooled = [self._pool(embedded, members, self._pools[kind]) for kind, members in
                  (("ancestors", ancestors), ("descendants", descendants),
                   ("parallel", parallel))]
        own = tf.reduce_sum(embedded * current, axis=-2)
        device_of = observation["group_device"] + (tf.range(batch) * n_devices)[:, None]
        on_device = _segment_mean(flat, tf.reshape(device_of, [-1]), batch * n_devices)
        return (tf.concat(pooled + [own], axis=-1),
                tf.reshape(on_device, [batch, n_devices, flat.shape[-1]]))

    def _message_passing(self, h, senders, receivers, count, layers):
        """Each round, every group hears the mean of what its senders say."""
        f, g, keep, norm = layers
        for _ in range(self._rounds):
            heard = _segment_mean(tf.gather(f(h), senders), receivers, count)
            h = norm(g(heard) + keep(h))
        return h

    @staticmethod
    def _pool(embedded, members, layers):
        f, g = layers
        count = tf.maximum(tf.reduce_sum(members, axis=-2), 1.0)
        return g(tf.reduce_sum(members * f(embedded), axis=-2) / count)


class _BuiltOnAnExample:
    """TF-Agents builds a network's variables on a random input drawn from its input spec;
    this one's sizes are open and its indices unbounded, so the draw comes from
    specs.example_spec() instead, and the open spec stays the network's."""

    def create_variables(self, input_tensor_spec=None, **kwargs):
        if self._network_output_spec is None:
            open_spec = self._input_tensor_spec
            self._input_tensor_spec = tensor_spec.from_spec(specs.example_spec())
            try:
                super().create_variables(**kwargs)
            finally:
                self._input_tensor_spec = open_spec
        return self._network_output_spec


def _squashed(net, observation, head):
    """Apply `head` to observations with any outer (batch, time) dimensions."""
    squash = utils.BatchSquash(nest_utils.get_outer_rank(observation, net.input_tensor_spec))
    return squash.unflatten(head(tf.nest.map_structure(squash.flatten, observation)))


class _StepChangePath(tf.keras.layers.Layer):
    """Per device, minus a trained weight times the simulated step change of its row."""

    def __init__(self, initial: float, **kwargs):
        super().__init__(**kwargs)
        self._initial = initial

    def build(self, input_shape):
        self.weight = self.add_weight(name="weight", shape=(), trainable=True,
                                      initializer=tf.keras.initializers.Constant(self._initial))
        super().build(input_shape)

    def call(self, change):
        return -self.weight * change


class PlacetoNetwork(_BuiltOnAnExample, network.DistributionNetwork):
    """The policy: observation -> Categorical over the observation's devices."""

    def __init__(self, observation_spec, action_spec, embedding: int = 32, rounds: int = 8,
                 candidate_features: Optional[int] = None, step_change_weight: float = 0.0,
                 name: str = "PlacetoNetwork"):
        """candidate_features: how many of the device rows' columns it reads (the first
        ones; None: all), so that a policy trained before a column was appended still
        restores and scores as it did. step_change_weight: the first weight of the direct
        path from the step change (0: the network scores as one without the path did; a
        checkpoint that has the path restores its own); no path where the columns read
        stop before the step change's."""
        output_spec = distribution_spec.DistributionSpec(
            tfp.distributions.Categorical,
            {"logits": tensor_spec.TensorSpec([None], tf.float32)},
            sample_spec=action_spec, dtype=action_spec.dtype)
        super().__init__(input_tensor_spec=observation_spec, state_spec=(),
                         output_spec=output_spec, name=name)
        d = embedding
        self._candidate_features = candidate_features
        self._step_change = (None if candidate_features is not None
                             and candidate_features <= specs.STEP_CHANGE
                             else _StepChangePath(step_change_weight, name="step_change"))
        self._body = _Body(embedding, rounds, name="body")
        self._scorer = [
            _dense(4 * d, name="score_1"), _dense(2 * d, name="score_2"),
            tf.keras.layers.Dense(1, name="logit",    # small: a first policy near uniform
                                  kernel_initializer=tf.keras.initializers.VarianceScaling(
                                      0.1))]

    @property
    def step_change_weight(self) -> tf.Variable:
        """The direct path's weight (ValueError where the network reads no step change)."""
        if self._step_change is None:
            raise ValueError("this network reads no step change: it has no path from it")
        return self._step_change.weight

    def call(self, observation, step_type=None, network_state=(), training=False):
        return tfp.distributions.Categorical(
            logits=_squashed(self, observation, self._logits)), network_state

    def _logits(self, observation):
        context, on_device = self._body(observation)
        n_devices = tf.shape(on_device)[1]
        z = tf.concat([tf.repeat(context[:, None, :], n_devices, axis=1), on_device,
                       observation["candidates"][..., :self._candidate_features]],
                      axis=-1)                                            # [M, D, ...]
        for layer in self._scorer:
            z = layer(z)
        logits = z[..., 0]
        if self._step_change is not None:
            logits += self._step_change(observation["candidates"][..., specs.STEP_CHANGE])
        return logits + (1.0 - observation["device_mask"]) * _MASKED_LOGIT


class PlacetoValueNetwork(_BuiltOnAnExample, network.Network):
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
        z = self._body(observation)[0]
        for layer in self._head:
            z = layer(z)
        return z[..., 0]
