"""Placing with a trained policy: one greedy episode (zero-shot), or a fine-tuning budget.

A zero-shot placement needs only the exported policy, a SavedModel written by TF-Agents'
PolicySaver, loaded with plain TensorFlow: it runs in a process that never imports tf-agents
and whatever Keras it chose. Fine-tuning trains the policy further on the new graph, which
needs tf-agents (and so legacy Keras, set before TensorFlow loads).

A policy directory holds `policy/` (the SavedModel) and `checkpoints/` (to fine-tune from), as
tf_placeto.policy.training writes them. The package ships one (`pretrained_policy()`), for
every setting: devices of one process, GPUs of one machine and a cluster's tasks, 2 to 16
devices. Its observation carries what decides whether a split pays there (each device's
speed, the link, the cost of a task and of a crossing tensor), so one network serves them all
(docs/design/policy.md, "The policy shipped, and how to retrain it"; how well in each:
docs/results/policy.md, "One policy for every setting").

Where an episode starts (`start`): "random", Placeto's fixed random placement, which shows what
the policy alone finds; "single", every group on the best device, where the policy must find
any split itself; or "fast" (the default), the best decision of the fast placers
(placers.common.fast_placers), which the policy then improves where it can: a placement from it
is never slower than theirs in simulation, and their decisions count as evaluations.

The greedy episode walks the groups several times (`passes`, episode.greedy_walk): each pass
decides every group again from where the one before ended, for the pass's time again, and a
pass that moves no group ends the walk. By default up to PASSES passes, and no pass is begun
that would end the decision past DECIDE_SECONDS: on large graphs it keeps to the decision time
the project promises, and graphs of a few hundred groups walk every pass.

The placement returned is the best met on the walk (the start and every device the episode
simulated for a group's row included); the facts also give the policy's own answer, the last
placement of its greedy episode (`policy_step_s`), so that what the policy finds is not
confused with where it started or what it looked at.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.log import progress
from tf_placeto.placers.common import evaluations_to_within
from tf_placeto.policy.checkpoints import BASELINES, CHECKPOINTS, read_log
from tf_placeto.policy.episode import GreedyWalk, greedy_walk
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.starts import START_KINDS, initial_placement

PRETRAINED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained")
# fine-tuning's episodes walk on from where the one before ended: starting every episode
# afresh found less in as many iterations (docs/results/policy.md, "Per graph against the RNN
# planner")
FINE_TUNING_RESTART = "previous"
# the greedy episode's passes over the groups, at most, unless asked for a number: three placed
# the unseen families and the audit set better than one, and five no better than three
# (docs/results/generalisation.md, "Walking the groups again"); no pass is begun that would end
# the decision past DECIDE_SECONDS (issue 59's decision time on 5,000-op graphs)
PASSES = 3
DECIDE_SECONDS = 10.0


def pretrained_policy() -> str:
    """The policy shipped with the package, for any devices (docs/design/policy.md, "The
    policy shipped, and how to retrain it")."""
    if not os.path.isdir(os.path.join(PRETRAINED, "policy")):
        raise InputError(f"no pretrained policy in {PRETRAINED}: train one with "
                         "`tf-placeto train` and pass its directory")
    return PRETRAINED


def _checked(policy_dir: str) -> str:
    if not os.path.isfile(os.path.join(policy_dir, "policy", "saved_model.pb")):
        raise InputError(f"{policy_dir}: not a trained policy (no policy/saved_model.pb; "
                         "`tf-placeto train --out DIR` makes one)")
    return policy_dir


class SavedPolicy:
    """The `action` signature of a PolicySaver SavedModel, run in its own TF1 session.

    Through the signature's flat tensors, not `tf.saved_model.load`: that would rebuild the
    policy's Python objects, TensorFlow Probability's distributions among them, and
    TensorFlow Probability does not import under Keras 3.
    """

    def __init__(self, policy_dir: str):
        import tensorflow as tf  # heavy: loaded when a policy is first used

        self._graph = tf.Graph()
        self._session = tf.compat.v1.Session(graph=self._graph)
        with self._graph.as_default():
            meta_graph = tf.compat.v1.saved_model.loader.load(
                self._session, ["serve"], os.path.join(_checked(policy_dir), "policy"))
        signature = meta_graph.signature_def["action"]
        self._inputs = {key: info.name for key, info in signature.inputs.items()}
        self._action = signature.outputs["action"].name
        # a policy exported before device-row columns were appended reads the first ones
        self._candidate_features = signature.inputs[
            "0/observation/candidates"].tensor_shape.dim[-1].size

    def action(self, observation: dict, first: bool) -> int:
        feed = {self._inputs["0/step_type"]: [0 if first else 1],
                self._inputs["0/reward"]: [0.0], self._inputs["0/discount"]: [1.0]}
        observation = {**observation, "candidates":
                       observation["candidates"][:, :self._candidate_features]}
        feed.update({self._inputs[f"0/observation/{key}"]: value[None]
                     for key, value in observation.items()})
        return int(self._session.run(self._action, feed)[0])


@functools.lru_cache(maxsize=4)
def loaded_policy(policy_dir: str) -> SavedPolicy:
    """The exported policy of `policy_dir`, loaded once per process."""
    return SavedPolicy(policy_dir)


def greedy_placement(problem, policy_dir: str, initial: np.ndarray = None,
                     passes: int = 1, seconds: float = None) -> GreedyWalk:
    """The greedy episode of the policy on `problem` from `initial` (default: a random
    placement), of at most `passes` passes over the groups, none begun that would end past
    `seconds` (None: no clock)."""
    return greedy_walk(GraphView(problem, initial), loaded_policy(policy_dir), passes, seconds)


def walk_limits(passes: int = None) -> tuple:
    """(passes, seconds) of a greedy walk: `passes` with no clock where a number is asked
    for; by default up to PASSES passes, none begun that would end past DECIDE_SECONDS."""
    return (PASSES, DECIDE_SECONDS) if passes is None else (passes, None)


def fine_tuned_placement(problem, policy_dir: str, episodes: int, seed: int = 0,
                         initial: np.ndarray = None, greedy: GreedyWalk = None,
                         restart: str = FINE_TUNING_RESTART) -> tuple:
    """(device per group, objective in us, objectives): the best placement met while training
    the policy further on `problem` for `episodes` iterations, or its greedy one if that is
    better; the objectives of the greedy episode's placements then the training's, in order.
    The first episodes start from `initial` (default: a random placement), as the greedy
    walk did, the later ones where the one before ended (`restart`, starts.RESTARTS:
    "previous", so that the walks go on improving one placement; "fixed": each from
    `initial`); starting them where the greedy walk ended found less (docs/decisions.md,
    "The learned policy"). `greedy`: what greedy_placement gave from `initial`, if the
    caller has it. A progress bar shows on a terminal."""
    # heavy: tf-agents and TensorFlow, loaded only to fine-tune
    from tf_placeto.policy.training import Trainer, TrainingConfig

    walk = greedy or greedy_placement(problem, policy_dir, initial)
    devices, value, objectives = walk.devices, walk.value, walk.objectives
    scratch = tempfile.mkdtemp(prefix="tf-placeto-finetune-")
    try:
        # the network and optimizer go on; the baselines belong to the graphs it trained on
        shutil.copytree(os.path.join(_checked(policy_dir), CHECKPOINTS),
                        os.path.join(scratch, CHECKPOINTS),
                        ignore=shutil.ignore_patterns(BASELINES))
        logged = read_log(os.path.join(policy_dir, "training.json")).get("config", {})
        # the network's own settings; not how its training began or what it imitated
        config = TrainingConfig(**{**logged, "seed": seed, "restart": restart,
                                   "warm_start": None, "keep_imitating": 0})
        trainer = Trainer([problem], scratch, config, initial=[initial])
        with progress(total=episodes, desc="placeto: fine-tuning", unit="iteration",
                      leave=False) as bar:
            def iterated(row):
                bar.update(1)
                bar.set_postfix(best_ms=f"{trainer.best(0)[0] / 1e3:.1f}")

            trainer.run(trainer.iterations_done + episodes, progress=iterated,
                        checkpoint_every=10**9)
        tuned_value, tuned = trainer.best(0)
        objectives = np.concatenate([objectives, trainer.objectives(0)])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if tuned_value < value:
        return tuned, tuned_value, objectives
    return devices, value, objectives


def place(problem, policy_dir: str = None, budget: int = 0, seed: int = 0,
          start: str = "fast", passes: int = None) -> tuple:
    """Device per group of `problem` (any number of groups and devices), and facts: among
    them the placements evaluated (simulated) in all and until the best was within 5%,
    where the episodes started (`start`, one of START_KINDS), the passes the greedy episode
    walked (at most `passes`; None: up to PASSES, none begun that would end past
    DECIDE_SECONDS), and, in simulated seconds, the policy's own answer
    (`policy_step_s`: the last placement of its greedy episode; `pass_step_s`: where each
    pass ended) beside the best placement that episode met (`best_on_walk_step_s`, its
    start included)."""
    if start not in START_KINDS:
        raise InputError(f"start must be one of {', '.join(START_KINDS)}, not {start!r}")
    began = time.perf_counter()
    policy_dir = policy_dir or pretrained_policy()
    started_from, initial, tried = initial_placement(problem, start)
    passes, seconds = walk_limits(passes)
    if seconds is not None:          # the clock is the decision's: the start's time counts
        seconds -= time.perf_counter() - began
    greedy = greedy_placement(problem, policy_dir, initial, passes, seconds)
    if budget > 0:
        devices, value, objectives = fine_tuned_placement(problem, policy_dir, budget, seed,
                                                          initial=initial, greedy=greedy)
    else:
        devices, value, objectives = greedy.devices, greedy.value, greedy.objectives
    if tried:           # the episodes' start is one of the placements tried: counted once
        objectives = np.concatenate([tried, objectives[1:]])
    return np.asarray(devices), {
        "policy": policy_dir, "budget": budget,
        "start": started_from, "passes": greedy.passes, "objective_us": float(value),
        "policy_step_s": float(greedy.end_value) / 1e6,
        "pass_step_s": [float(ended) / 1e6 for ended in greedy.pass_values],
        "best_on_walk_step_s": float(greedy.value) / 1e6,
        "evaluations": len(objectives),
        "evaluations_to_5pct": evaluations_to_within(objectives)}
