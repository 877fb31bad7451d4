"""The hierarchical planner of Mirhoseini et al. (ICLR 2018), learned afresh on each graph.

A grouper, a feed-forward network with a softmax over K planner groups, puts each unit in a
planner group; a sequence-to-sequence LSTM with attention reads the planner groups' embeddings
and names a device for each; every unit goes where its planner group goes. The units are the
groups of the PlacementProblem (colocation already holds inside them) and
K = min(units, 20 x devices, 256), as in the paper. Both networks learn together with
REINFORCE: the reward of a sampled placement is -sqrt(objective), the baseline an exponential
moving average of the reward, the logits of the device softmax are bounded with tanh and the
gradient's norm is clipped, as in the paper. The objective is Placeto's
(tf_placeto.policy.objective.Objective: simulated step time plus a memory penalty), so that
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

The networks are in rnn_network.py, on TensorFlow's core only; this module stays light, so
that the placer registry lists the planner without loading TensorFlow.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_placeto.log import progress
from tf_placeto.placers.common import mean_compute_us
from tf_placeto.placers.objectives import chain_heads
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.policy.objective import Objective, single_device

BUDGET = 400                # placements sampled and simulated, by default
BATCH = 8                   # samples per update
LEARNING_RATE = 0.001       # Adam's (the paper: 0.1, for far longer runs)
BASELINE_DECAY = 0.9        # of the reward's moving average (the paper's bl_dec)


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
    from tf_placeto.policy.rnn_network import Planner  # heavy: TensorFlow, once a search runs

    planner = Planner(Units.of(problem), k, problem.n_devices, batch, learning_rate, seed)
    home = single_device(problem)     # where a unit goes when its planner group's device has
    allowed = problem.allowed         # no kernel for it
    objectives, baseline, spread = [], None, None
    best = (np.inf, home)
    with progress(total=budget, desc="rnn: planning", unit="placement", leave=False) as bar:
        for step in range(-(-budget // batch)):
            grouping, devices = (t.numpy()
                                 for t in planner.sample(np.array([seed, step], np.int64)))
            placements = np.take_along_axis(devices, grouping, axis=1)
            placements = np.where(allowed[np.arange(problem.n_groups), placements], placements,
                                  home)
            values = [objective(p)[0] for p in placements[:budget - len(objectives)]]
            objectives += values
            if min(values) < best[0]:
                best = (min(values), placements[int(np.argmin(values))])
            bar.update(len(values))
            bar.set_postfix(best_ms=f"{best[0] / 1e3:.1f}")
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
