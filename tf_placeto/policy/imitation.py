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

    def joined(self, other: "Demonstrations") -> "Demonstrations":
        """These problems' demonstrations followed by `other`'s, as more problems."""
        return Demonstrations(self.observations + other.observations,
                              self.targets + other.targets, self.decisions + other.decisions)

    @classmethod
    def record(cls, problems: Sequence[PlacementProblem], decisions: Sequence,
               starts: int = 2, seed: int = 0, shown: bool = True,
               teachers: Sequence = None, follower=None,
               passes: int = 1) -> "Demonstrations":
        """Per problem, episodes that move each group to its device in the (canonical)
        decision: from `starts` random starts, from the decision itself and from every group
        on one device drawn at random (where it may), so that the network also sees the
        placements that `--start fast` and `--start single` begin from: a network shown only
        random starts learns to leave a device that holds everything. Where a problem has a
        teacher in `teachers` (one per problem, None where the decision is the lesson), the
        episodes from those starts follow it instead (a policy answering action(observation,
        first), such as agent.GreedyActor or episode.SimulatedGreedy): each move is the
        teacher's, which is the right one, so a network learns what the teacher does from
        each start, not one decision it reached from one. With a `follower` (the network
        being trained, as such a policy), the episodes from the random starts move where it
        does and only the targets are the lesson's (DAgger): a network taught only along
        the lesson's own walks meets, once its first move differs, states it was never
        taught in. passes: how many times the follower walks the groups (as `place
        --passes`), each pass from where the one before ended, until one moves no group; in
        the passes after the first, every move's lesson is the decision's device, teacher or
        not: a teacher answers a state from its own first pass, and a network that walks
        again must learn to finish the decision, not to start it anew (docs/results/
        generalisation.md, "Walking the groups again"). shown: with a progress bar (on a
        terminal)."""
        stacked, demonstrated, canonicals = [], [], []
        lessons = list(zip(problems, decisions))
        if shown:
            lessons = progress(lessons, desc="demonstrations", unit="problem", leave=False)
        for index, (problem, decision) in enumerate(lessons):
            canonical = problem.canonical(decision)
            view = GraphView(problem)
            walks = [start_placement(problem, seed + 1000 * index + k) for k in range(starts)]
            if follower is None:
                one_device = start_placement(problem, seed + 1000 * index + starts)
                device = np.random.default_rng([seed, index]).integers(problem.n_devices)
                one_device[problem.allowed[:, device]] = device
                walks += [canonical, one_device]
            teacher = teachers[index] if teachers is not None else None
            one_hot = np.eye(problem.n_devices, dtype=np.float32)
            observations, targets = [], []
            for start in walks:
                episode = Episode(view, start, look_ahead=follower is not None)
                renaming = _Renaming(problem, canonical)
                for walked in range(passes if follower is not None else 1):
                    if walked:
                        if not episode.moved_any:
                            break
                        episode = episode.next_pass()
                    while not episode.done:
                        group = episode.position
                        observations.append(episode.observation())
                        if teacher is not None and not walked:
                            targets.append(one_hot[teacher.action(observations[-1],
                                                                  group == 0)])
                        else:
                            targets.append(renaming.right(group))
                        episode.move(int(targets[-1].argmax()) if follower is None
                                     else follower.action(observations[-1], group == 0))
                        renaming.moved(group, int(episode.devices[group]))
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


class _Renaming:
    """The right devices of a walk towards a decision in canonical names. Where devices are
    interchangeable, a device of the decision is the walk's device where the walk first put
    one of its groups, and until then any device the walk has not used for another of the
    decision's: walking the decision itself, the names are the decision's."""

    def __init__(self, problem: PlacementProblem, decision: np.ndarray):
        self._allowed, self._decision = problem.allowed, decision
        self._interchangeable = problem.interchangeable
        self._one_hot = np.eye(problem.n_devices, dtype=np.float32)
        self._walked = {}            # the decision's device -> the walk's

    def right(self, group: int) -> np.ndarray:
        """[devices]: 1 where `group` is right."""
        device = int(self._decision[group])
        if not self._interchangeable:
            return self._one_hot[device]
        if device in self._walked:
            return self._one_hot[self._walked[device]]
        right = self._allowed[group].astype(np.float32)
        right[list(self._walked.values())] = 0.0
        return right if right.any() else self._one_hot[device]

    def moved(self, group: int, device: int) -> None:
        """The walk put `group` on `device`."""
        ours = int(self._decision[group])
        if (self._interchangeable and ours not in self._walked
                and device not in self._walked.values()):
            self._walked[ours] = device


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
