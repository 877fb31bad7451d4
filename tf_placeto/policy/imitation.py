"""The policy's first lessons: imitating the best known decisions (behaviour cloning).

Trained by REINFORCE alone from random starts, the shipped policy's greedy episodes put every
group on one device: a move's reward mostly pays for joining a group to its neighbours. So
that training can start from a policy that splits, the network can first be taught, by
cross-entropy, to move each group where a demonstration put it: the best decision known for
its problem (`starts.best_known`: the fast placers', or the exact placer's where it proves
optimality and simulates faster). The demonstrated episodes walk from random starts through
those moves, so the network sees what a greedy episode of a good policy would see. Devices that
are interchangeable are renamed by first use in group order (`PlacementProblem.canonical`), so
that a demonstration does not depend on which device a placer happened to call 0; and where a
demonstrated move opens a device no visited group uses yet, every such device is right: the
network scores devices alike, so it cannot tell unused interchangeable devices apart, and
need not. What it did for transfer on the graph families: docs/results/policy.md, "Imitation".

This module loads TensorFlow when it is imported (training.py uses it)."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import numpy as np

from tf_placeto.log import progress
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy import require_tf_agents
from tf_placeto.policy.agent import traced_for_every_size
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.starts import start_placement

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

import tensorflow as tf


@dataclasses.dataclass
class Demonstrations:
    """Per problem, its observations (a dict of stacked arrays: one problem's observations
    share their shapes), for each which devices are right ([moves, devices] of 0/1: the
    demonstrated one, or every unused one where the move opens a device), and the decision
    demonstrated (canonical device names)."""

    observations: list
    targets: list
    decisions: list

    def __len__(self) -> int:
        return sum(len(t) for t in self.targets)

    def devices_used(self, problem: int) -> int:
        """How many devices the demonstrated decision of `problem` uses."""
        return len(np.unique(self.decisions[problem]))

    def replace(self, problem: int, lesson: "Demonstrations") -> None:
        """`problem`'s demonstrations become those of `lesson`, which holds one problem's."""
        (self.observations[problem],), (self.targets[problem],), (self.decisions[problem],) = (
            lesson.observations, lesson.targets, lesson.decisions)

    @classmethod
    def record(cls, problems: Sequence[PlacementProblem], decisions: Sequence,
               starts: int = 2, seed: int = 0, shown: bool = True,
               teachers: Sequence = None) -> "Demonstrations":
        """Per problem, episodes that move each group to its device in the (canonical)
        decision: from `starts` random starts, from the decision itself and from every group
        on one device drawn at random (where it may), so that the network also sees the
        placements that `--start fast` and `--start single` begin from: a network shown only
        random starts learns to leave a device that holds everything. Where a problem has a
        teacher in `teachers` (one per problem, None where the decision is the lesson), the
        episodes from those starts follow it instead (a policy answering action(observation,
        first), such as agent.GreedyActor or episode.SimulatedGreedy): each move is the
        teacher's, which is the right one, so a network learns what the teacher does from
        each start, not one decision it reached from one. shown: with a progress bar (on a
        terminal)."""
        stacked, demonstrated, canonicals = [], [], []
        lessons = list(zip(problems, decisions))
        if shown:
            lessons = progress(lessons, desc="demonstrations", unit="problem", leave=False)
        for index, (problem, decision) in enumerate(lessons):
            canonical = problem.canonical(decision)
            right = _right_devices(problem, canonical)
            view = GraphView(problem)
            walks = [start_placement(problem, seed + 1000 * index + k) for k in range(starts)]
            one_device = start_placement(problem, seed + 1000 * index + starts)
            device = np.random.default_rng([seed, index]).integers(problem.n_devices)
            one_device[problem.allowed[:, device]] = device
            teacher = teachers[index] if teachers is not None else None
            one_hot = np.eye(problem.n_devices, dtype=np.float32)
            observations, targets = [], []
            for start in walks + [canonical, one_device]:
                episode = Episode(view, start)
                while not episode.done:
                    observations.append(episode.observation())
                    if teacher is not None:
                        moved = teacher.action(observations[-1], first=episode.position == 0)
                        targets.append(one_hot[moved])
                    else:
                        targets.append(right[episode.position])
                    episode.move(int(targets[-1].argmax()))
            stacked.append({key: np.stack([o[key] for o in observations])
                            for key in observations[0]})
            demonstrated.append(np.stack(targets))
            canonicals.append(canonical)
        return cls(stacked, demonstrated, canonicals)

    def batches(self, size: int, rng: np.random.Generator = None,
                problems: Sequence[int] = None):
        """(observations, targets) in batches of at most `size`, each of one problem (of
        `problems`, indices into the recorded ones; default all); the batches and their
        members shuffled when given `rng`."""
        chunks = []
        for problem in range(len(self.targets)) if problems is None else problems:
            targets = self.targets[problem]
            order = np.arange(len(targets)) if rng is None else rng.permutation(len(targets))
            chunks += [(problem, order[low:low + size]) for low in range(0, len(order), size)]
        for k in (range(len(chunks)) if rng is None else rng.permutation(len(chunks))):
            problem, chosen = chunks[k]
            yield ({key: value[chosen] for key, value in self.observations[problem].items()},
                   self.targets[problem][chosen])


def _right_devices(problem: PlacementProblem, decision: np.ndarray) -> np.ndarray:
    """[groups, devices]: the decision's device for each group, or, where the decision opens
    a device (interchangeable devices, in canonical names), every device not opened yet."""
    right = np.eye(problem.n_devices, dtype=np.float32)[decision]
    if problem.interchangeable:
        for group in range(problem.n_groups):
            opened = decision[:group]
            if decision[group] not in opened:
                right[group] = problem.allowed[group]
                right[group, opened] = 0.0
    return right


def imitate(train: Callable, demonstrations: Demonstrations, epochs: int,
            batch_size: int = 64, seed: int = 0, first_epoch: int = 1,
            progress: Callable[[dict], None] = lambda row: None) -> list:
    """Fit a network to the demonstrated devices with `train`, its cloning_step;
    per epoch, {"epoch", "loss", "accuracy", "seconds"} (accuracy: how often its argmax is a
    right device). Epochs `first_epoch` to `epochs` run, each shuffled by its own seed, so a
    resumed run shuffles as an unbroken one would; the step's optimizer carries its state
    across a resume."""
    history = []
    for epoch in range(first_epoch, epochs + 1):
        rng = np.random.default_rng([seed, epoch])
        start = time.perf_counter()
        losses, hits = [], 0.0
        for observation, right in demonstrations.batches(batch_size, rng):
            loss, hit = train(observation, right)
            losses.append(float(loss) * len(right))
            hits += float(hit)
        row = {"epoch": epoch, "loss": sum(losses) / len(demonstrations),
               "accuracy": hits / len(demonstrations),
               "seconds": time.perf_counter() - start}
        history.append(row)
        progress(row)
    return history


def cloning_step(network, optimizer) -> Callable:
    """One gradient step of `network` (a PlacetoNetwork) towards the right devices of a
    batch (observations, right [batch, devices]) by cross-entropy of the probability of any
    right device: returns (mean cross-entropy, how many it got right before the step)."""
    # the optimizer's slots made first: a variable made in the first trace would have
    # TensorFlow trace it twice
    network.create_variables()
    optimizer.build(network.trainable_variables)

    def step(observation, right):
        with tf.GradientTape() as tape:
            logits = network(observation)[0].logits
            loss = tf.reduce_mean(_cross_entropy(logits, right))
        gradients = tape.gradient(loss, network.trainable_variables)
        optimizer.apply_gradients(zip(gradients, network.trainable_variables))
        return loss, _hits(logits, right)

    return traced_for_every_size(step, network.input_tensor_spec,
                                 tf.TensorSpec([None], tf.float32))


def accuracy(network, demonstrations: Demonstrations, batch_size: int = 256) -> float:
    """How often the network's most likely device is a right one."""
    hits = sum(float(_hits(network(observation)[0].logits, right))
               for observation, right in demonstrations.batches(batch_size))
    return hits / max(len(demonstrations), 1)


def _cross_entropy(logits, right):
    """-log of the probability the network gives the right devices together."""
    return (tf.reduce_logsumexp(logits, axis=-1)
            - tf.reduce_logsumexp(logits + (right - 1.0) * 1e9, axis=-1))


def _hits(logits, right):
    """How many of a batch's most likely devices are right ones."""
    best = tf.argmax(logits, -1, output_type=tf.int32)
    return tf.reduce_sum(tf.gather(right, best, batch_dims=1))
