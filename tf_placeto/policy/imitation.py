"""The policy's first lessons: imitating the fast placers' decisions (behaviour cloning).

Trained by REINFORCE alone from random starts, the shipped policy's greedy episodes put every
group on one device: a move's reward mostly pays for joining a group to its neighbours. So
that training can start from a policy that splits, the network can first be taught, by
cross-entropy, to move each group where a demonstration put it: the best decision of the fast
placers (`starts.fast_start`). The demonstrated episodes walk from random starts through
those moves, so the network sees what a greedy episode of a good policy would see. Devices that
are interchangeable are renamed by first use in group order (`PlacementProblem.canonical`), so
that a demonstration does not depend on which device a placer happened to call 0. What it did
for transfer on the graph families (nothing measurable yet) is in BUILD.md.

This module loads TensorFlow when it is imported (training.py uses it)."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import numpy as np

from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import require_tf_agents
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.starts import start_placement

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

import tensorflow as tf


@dataclasses.dataclass
class Demonstrations:
    """Observations (a dict of stacked arrays) and the demonstrated device of each."""

    observations: dict
    actions: np.ndarray

    def __len__(self) -> int:
        return len(self.actions)

    @classmethod
    def record(cls, problems: Sequence[PlacementProblem], decisions: Sequence,
               starts: int = 2, seed: int = 0) -> "Demonstrations":
        """Per problem, `starts` episodes from random starts that move each group to its
        device in the (canonical) decision."""
        observations, actions = [], []
        for index, (problem, decision) in enumerate(zip(problems, decisions)):
            target = problem.canonical(decision)
            view = GraphView(problem)
            for start in range(starts):
                episode = Episode(view, start_placement(problem, seed + 1000 * index + start))
                while not episode.done:
                    observations.append(episode.observation())
                    actions.append(target[episode.position])
                    episode.move(int(target[episode.position]))
        stacked = {key: np.stack([o[key] for o in observations]) for key in observations[0]}
        return cls(stacked, np.asarray(actions, np.int32))

    def batches(self, size: int, rng: np.random.Generator = None):
        """(observations, actions) in batches of `size`, shuffled when given `rng`."""
        order = np.arange(len(self)) if rng is None else rng.permutation(len(self))
        for low in range(0, len(order), size):
            chosen = order[low:low + size]
            yield {key: value[chosen] for key, value in self.observations.items()}, \
                self.actions[chosen]


def imitate(network, demonstrations: Demonstrations, epochs: int, batch_size: int = 64,
            learning_rate: float = 1e-3, seed: int = 0,
            progress: Callable[[dict], None] = lambda row: None) -> list:
    """Fit `network` (a PlacetoNetwork) to the demonstrated devices by cross-entropy; per
    epoch, {"epoch", "loss", "accuracy", "seconds"} (accuracy: how often its argmax is the
    device)."""
    optimizer = tf.keras.optimizers.Adam(learning_rate)

    @tf.function
    def train(observation, action):
        with tf.GradientTape() as tape:
            logits = network(observation)[0].logits
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=action, logits=logits))
        gradients = tape.gradient(loss, network.trainable_variables)
        optimizer.apply_gradients(zip(gradients, network.trainable_variables))
        return loss, _hits(logits, action)

    rng = np.random.default_rng(seed)
    history = []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        losses, hits = [], 0.0
        for observation, action in demonstrations.batches(batch_size, rng):
            loss, hit = train(observation, action)
            losses.append(float(loss) * len(action))
            hits += float(hit)
        row = {"epoch": epoch, "loss": sum(losses) / len(demonstrations),
               "accuracy": hits / len(demonstrations),
               "seconds": time.perf_counter() - start}
        history.append(row)
        progress(row)
    return history


def accuracy(network, demonstrations: Demonstrations, batch_size: int = 256) -> float:
    """How often the network's most likely device is the demonstrated one."""
    hits = sum(float(_hits(network(observation)[0].logits, action))
               for observation, action in demonstrations.batches(batch_size))
    return hits / max(len(demonstrations), 1)


def _hits(logits, actions):
    """How many of a batch's most likely devices are the demonstrated ones."""
    return tf.reduce_sum(tf.cast(
        tf.equal(tf.argmax(logits, -1, output_type=tf.int32), actions), tf.float32))
