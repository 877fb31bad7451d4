"""Training the Placeto policy with TF-Agents: REINFORCE (the paper's) or PPO.

Each iteration takes the next problem and runs `episodes` episodes of it side by side (a
batch of environments stepping together, Placeto's parallel workers), then takes one gradient
step on all of them. REINFORCE uses Placeto's baseline: for each problem and each
step index, the mean return of the last `baseline_window` episodes at that step. It is applied
by reshaping rewards, r'_t = r_t - b_t + b_(t+1), so that the undiscounted return the agent
computes from t is exactly G_t - b_t. Adam with the learning rate decayed from 1e-3 to 1e-4,
gradients clipped to a global norm of 1.25, an entropy bonus. With `keep_imitating`, imitation
(imitation.py) goes on as a regulariser: after an iteration on a problem where the policy's
greedy episode ends slower than the problem's lesson (or, with `keep_imitating_where`
"one-device", on a problem whose lesson is on one device), a few batches of that problem's
demonstrations. The lesson is the demonstrated decision until an episode meets a placement
faster by LESSON_MARGIN; that placement is the lesson from then on (self-imitation), so a
teacher that reinforcement learning beats does not hold the policy back. Trained on several
settings at once, reinforcement learning keeps what pays in most of them and forgets what
imitation taught for the others (the cluster's gathering, lost to k80's iterations:
docs/results/policy.md, "Training on both settings at once"); this brings it back only where the policy falls behind its lesson. Given
real.RealSteps, iterations take only problems on the runtime's devices and their episodes'
returns are measured for real (real.py): training's last, optional stage.

Everything lives under one directory, which holds nothing else (check_training_folder):
`checkpoints/` (agent, optimizer, step: `ckpt-N`, numbered on from every one before),
`state/` (`ckpt-N.json`, each checkpoint's log and baselines),
`summaries/` (TensorBoard), `policy/` (the greedy policy exported with TF-Agents'
PolicySaver: a SavedModel that runs without tf-agents) and `training.json` (the configuration,
each imitation epoch and what each iteration found), which `tf-placeto train` draws as
`learning_curve.png`.

A save is one unit, so that a run killed at any point resumes whole: every checkpoint but the
one the run went on from (whole) is removed, then the new one's state file is written
(atomically), then its files (fsync'd), then training.json, a readable copy of the log
(atomically). A run resumes from the newest checkpoint that is whole (its files read back,
checksums and all, and its state file parses) with that checkpoint's log and baselines; each
one passed over is named in one line. A checkpoint of an older version, without a state file,
takes its log from training.json and its baselines from checkpoints/baselines.json. `policy/`
is exported into a staging folder and swapped in (files.Staging): it is always a whole
SavedModel, the old one or the new.

This module loads TF-Agents and TensorFlow when it is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import random
import re
import shutil
import time
import warnings
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from tf_placeto.errors import InputError
from tf_placeto.files import (FileLock, Staging, fsync_folder, fsync_tree, holder_pid,
                              write_atomically)
from tf_placeto.policy import require_tf_agents

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

import tensorflow as tf
from tf_agents.agents.ppo import ppo_clip_agent
from tf_agents.agents.reinforce import reinforce_agent
from tf_agents.environments import batched_py_environment, tf_py_environment
from tf_agents.policies import policy_saver
from tf_agents.trajectories import trajectory
from tf_agents.utils import common

from tf_placeto.policy.environment import PlacementEnvironment
from tf_placeto.policy.imitation import Demonstrations, cloning_step, imitate
from tf_placeto.policy.episode import greedy_walk
from tf_placeto.policy.objective import Objective
from tf_placeto.policy.network import PlacetoNetwork, PlacetoValueNetwork
from tf_placeto.policy.real import RealSteps, real_rewards
from tf_placeto.policy.starts import IMITATE_WHERE

CHECKPOINTS, STATE, SUMMARIES, POLICY, LOG = ("checkpoints", "state", "summaries", "policy",
                                              "training.json")
BASELINES = "baselines.json"       # in CHECKPOINTS: an older version's (state/ keeps them now)
IMITATION_LEARNING_RATE = 1e-3
LESSON_MARGIN = 0.01        # how much faster a placement met must be to become the lesson

log = logging.getLogger(__name__)


@dataclasses.dataclass
class TrainingConfig:
    algorithm: str = "reinforce"         # or "ppo"
    episodes: int = 4                    # per iteration, one per environment of the batch
    learning_rate: float = 1e-3
    final_learning_rate: float = 1e-4
    decay_iterations: int = 2000
    entropy: float = 0.01
    gradient_clipping: float = 1.25
    baseline_window: int = 10
    embedding: int = 32
    rounds: int = 8
    restart: str = "fixed"               # where each episode starts (starts.RESTARTS)
    seed: int = 0
    warm_start: Optional[str] = None     # a training directory whose weights a new run takes
    keep_imitating: int = 0              # imitation batches after an iteration that lags
    keep_imitating_where: str = "behind"     # which iterations lag (starts.IMITATE_WHERE)
    imitation_batch: int = 64
    candidate_features: Optional[int] = None    # device-row columns read (None: all; specs.py)


class Trainer:
    """A TF-Agents agent, its environments and its on-disk state, for a set of problems."""

    def __init__(self, problems: Sequence, out: str, config: TrainingConfig = TrainingConfig(),
                 initial: Sequence = None, starts: Sequence[str] = None,
                 labels: Sequence[dict] = None):
        """initial: per problem, the fixed start placement of its episodes, or None (a random
        one, as Placeto's). starts: per problem, the name of that start (starts.START_KINDS),
        logged with each iteration and keeping its own baseline (default: "random" where
        initial is None, else "given"). labels: per problem, what names it (its graph, device
        count and link, as api.training_problems gives them), logged with each iteration so
        that the log can be read by setting."""
        if config.algorithm not in ("reinforce", "ppo"):
            raise ValueError(f"algorithm must be 'reinforce' or 'ppo', not {config.algorithm!r}")
        if config.keep_imitating_where not in IMITATE_WHERE:
            raise ValueError(f"keep_imitating_where must be one of {IMITATE_WHERE}, not "
                             f"{config.keep_imitating_where!r}")
        check_training_folder(out)
        self._hold(out)
        self.config, self.out = config, out
        self.problems = list(problems)
        initial = initial or [None] * len(self.problems)
        self.starts = list(starts or ["random" if i is None else "given" for i in initial])
        self.labels = list(labels or [{}] * len(self.problems))
        self.environments = [PlacementEnvironment(self.problems, seed=config.seed,
                                                  restart=config.restart, initial=initial)
                             for _ in range(config.episodes)]     # one seed: in step
        batched = batched_py_environment.BatchedPyEnvironment(self.environments,
                                                              multithreading=False)
        self.env = tf_py_environment.TFPyEnvironment(batched)
        self.step = tf.Variable(0, dtype=tf.int64, name="train_step")
        with _seeded(config.seed):
            self.agent, self.actor = make_agent(self.env.time_step_spec(),
                                                self.env.action_spec(), config, self.step)
        self.baselines = Baselines(config.baseline_window)
        self.imitation_optimizer = tf.keras.optimizers.Adam(IMITATION_LEARNING_RATE)
        self.checkpoint = tf.train.Checkpoint(
            agent=self.agent, policy=self.agent.policy, train_step=self.step,
            imitation_optimizer=self.imitation_optimizer)
        for folder in (CHECKPOINTS, STATE):    # checkpoints/ first: it marks a training folder
            os.makedirs(os.path.join(out, folder), exist_ok=True)
        self.history, self.imitation = [], []
        self._saved = None          # the checkpoint this run goes on from: resumed, or saved last
        self._resume()
        self.writer = tf.summary.create_file_writer(os.path.join(out, SUMMARIES))
        self.demonstrations = None        # until demonstrate()
        self._clone = cloning_step(self.actor, self.imitation_optimizer)
        self._greedy = GreedyActor(self.actor)
        self._train = common.function(self.agent.train)
        self._act = common.function(self.agent.collect_policy.action)

    @staticmethod
    def _hold(out: str) -> None:
        """One process trains in `out` at a time (each save removes the checkpoints it did
        not write): the folder's lock, which this process keeps until it ends (re-entrant:
        its own trainers may resume there)."""
        os.makedirs(os.path.join(out, CHECKPOINTS), exist_ok=True)    # marks a training folder
        lock = FileLock(os.path.join(out, ".lock"), f"the training in {out}")
        if not lock.acquire(wait=False):
            raise InputError(f"--out {out}: another tf-placeto process (pid "
                             f"{holder_pid(lock.path) or 'unknown'}) trains there")

    def _resume(self) -> None:
        """Go on from the newest whole checkpoint under `out`, with its log and baselines; a
        new run where nothing was saved (from `warm_start`'s weights, if given)."""
        self._saved, state = _newest_whole(self.out, _saved_state)
        if self._saved is None:
            if self.config.warm_start:
                self._take_weights(self.config.warm_start)
            return
        self.imitation, self.history, self.baselines.seen = state
        # the imitation optimizer's slots are restored when imitation builds them (resume);
        # a reinforcement stage or fine-tuning never does, and TensorFlow would warn per slot
        self.checkpoint.restore(self._saved).expect_partial()
        if os.path.isfile(_state_path(self._saved)):
            self._write_log()    # training.json: the log of the checkpoint this run goes on from

    def _take_weights(self, folder: str) -> None:
        """The networks' weights from the last whole checkpoint of another run in `folder`
        (warm start). Where the observation has gained inputs since (appended last, as
        specs.py adds them), a weight matrix has more input rows than the old one: those rows
        start at zero, so the network starts out scoring as the old one did, and training
        finds their use."""
        checkpoints = os.path.join(folder, CHECKPOINTS)
        prefix, _ = _newest_whole(folder, lambda prefix: None)
        if prefix is None:
            raise InputError(f"--warm-start: no checkpoint in {checkpoints}")
        reader = tf.train.load_checkpoint(prefix)
        # the actor as REINFORCE and PPO keep it, and PPO's critic (where both runs have one)
        networks = {"_actor_network": self.actor, "_actor_net": self.actor,
                    "_value_net": getattr(self.agent, "_value_net", None)}
        taken = 0
        for key, shape in reader.get_variable_to_shape_map().items():
            path = key.split("/")
            root = networks.get(path[1]) if path[0] == "agent" and len(path) > 2 else None
            if root is None or "OPTIMIZER_SLOT" in path:
                continue
            variable = _tracked(root, path[2:path.index(".ATTRIBUTES")])
            old, new = reader.get_tensor(key), tuple(variable.shape)
            if old.shape != new:
                if len(new) != 2 or old.shape[1] != new[1] or old.shape[0] > new[0]:
                    raise InputError(f"--warm-start: {key} is {shape} in {checkpoints}, "
                                     f"{list(new)} here; only inputs appended to the "
                                     "observation carry over")
                old = np.concatenate([old, np.zeros((new[0] - old.shape[0], new[1]), old.dtype)])
            variable.assign(old)
            taken += 1
        if not taken:
            raise InputError(f"--warm-start: {checkpoints} holds no policy network")

    @property
    def iterations_done(self) -> int:
        """Iterations logged (and checkpointed with them); not the agent's train step, which
        PPO advances once per epoch of each iteration."""
        return len(self.history)

    def demonstrate(self, decisions: Sequence, starts: int = 2) -> None:
        """Record what imitation teaches: each group moved to its device in `decisions` (one
        per problem; imitation.py: walks from `starts` random starts, the decision and one
        device). A problem posed from several starts is recorded once."""
        lessons = {}
        for problem, decision in zip(self.problems, decisions):
            lessons.setdefault(id(problem), (problem, decision))
        self.demonstrations = Demonstrations.record(*zip(*lessons.values()), starts,
                                                    seed=self.config.seed)
        index = {key: i for i, key in enumerate(lessons)}
        self._lesson = [index[id(problem)] for problem in self.problems]
        taught_us = [Objective(problem)(np.asarray(decision))[0]
                     for problem, decision in lessons.values()]
        self.lesson_us = [taught_us[lesson] for lesson in self._lesson]    # per problem
        self._demonstration_starts = starts

    def _learn_from_best(self, problem: int) -> None:
        """Where an episode of `problem` has met a placement faster than its lesson, that
        placement becomes the lesson of the problem, from every start it is posed from."""
        best_us, devices = self.best(problem)
        lesson = self._lesson[problem]
        if not best_us < (1 - LESSON_MARGIN) * self.lesson_us[problem]:
            return
        recorded = Demonstrations.record([self.problems[problem]], [devices],
                                         self._demonstration_starts,
                                         seed=self.config.seed + lesson, shown=False)
        self.demonstrations.replace(lesson, recorded)
        for posed, taught in enumerate(self._lesson):
            if taught == lesson:
                self.lesson_us[posed] = best_us

    def imitate(self, decisions: Sequence, epochs: int, starts: int = 2,
                progress: Callable[[dict], None] = lambda row: None,
                taught: Optional[dict] = None) -> list:
        """Teach the actor, before any reinforcement learning, to move each group to its
        device in `decisions` (recorded by demonstrate(), unless it has recorded them
        already), until `epochs` passes are done in all. Each pass is checkpointed: a killed
        run resumes at its next pass (the checkpoint's log counts them, and keeps `taught`,
        whose decisions they were: problems per placer). Returns each epoch's loss and
        accuracy."""
        if len(self.imitation) >= epochs:
            return self.imitation
        if self.iterations_done:
            raise InputError(f"{self.out} has {self.iterations_done} iterations of "
                             "reinforcement learning already; imitation comes before them")
        if self.demonstrations is None:
            self.demonstrate(decisions, starts)

        def learned(row):
            self.imitation.append(row if taught is None else {**row, "taught": taught})
            self.save()
            progress(row)

        imitate(self.actor, self.demonstrations, epochs, self.imitation_optimizer,
                seed=self.config.seed, first_epoch=len(self.imitation) + 1, progress=learned)
        return self.imitation

    def run(self, iterations: int, progress: Callable[[dict], None] = lambda row: None,
            checkpoint_every: int = 10, real: Optional[RealSteps] = None) -> list:
        """Train until `iterations` iterations are done in all (a resumed run counts the old).
        With `real`, episodes take only its problems, and their returns are measured for real
        (real.py)."""
        if self.config.keep_imitating and self.demonstrations is None:
            raise ValueError("keep_imitating needs the decisions to imitate: demonstrate() "
                             "first")
        for environment in self.environments:
            environment.draw_from(None if real is None else real.problems)
        while self.iterations_done < iterations:
            start = time.perf_counter()
            experience, episodes = self._collect(real)
            with self.writer.as_default(step=self.iterations_done + 1):
                loss = self._train(experience).loss
                row = self._record(episodes, float(loss), time.perf_counter() - start)
                row.update(self._keep_imitating(row))
                for key in ("loss", "mean_return", "best_speedup", "real_return",
                            "simulated_return", "imitation_loss"):
                    if key in row:
                        tf.summary.scalar(key, row[key])
            progress(row)
            if self.iterations_done % checkpoint_every == 0 or self.iterations_done >= iterations:
                self.save()
        return self.history

    def imitation_follows(self, problem: int) -> tuple:
        """(whether imitation batches follow an iteration on `problem` now, what judged it, for
        the iteration's row). With `keep_imitating_where` "behind": where the policy's greedy
        episode ends slower than the problem's lesson (the demonstrated decision, or the best
        placement an episode met where that is faster); judged by the greedy episode, which
        is what the policy places with (its sampled episodes end slower wherever it
        explores). With "one-device": wherever the problem's lesson is on one device, and
        nowhere else, so gathering is taught where it is best (a cluster's tasks) and
        reinforcement learning alone decides the splits; no greedy episode is walked."""
        lesson = self._lesson[problem]
        judged = {"lesson_us": float(self.lesson_us[problem]),
                  "lesson_devices": self.demonstrations.devices_used(lesson)}
        if self.config.keep_imitating_where == "one-device":
            return judged["lesson_devices"] == 1, judged
        view = self.environments[0].views[problem]      # the episodes' start
        simulated = len(view.moves)
        judged["greedy_us"] = float(greedy_walk(view, self._greedy).end_value)
        del view.moves[simulated:]      # the judge's walk is not one of training's evaluations
        return judged["greedy_us"] > self.lesson_us[problem], judged

    def _keep_imitating(self, row: dict) -> dict:
        """After an iteration, the regulariser (`keep_imitating`): the episodes' best
        placement becomes the lesson where it is faster, then, where imitation_follows,
        `keep_imitating` batches of the problem's demonstrations. For the iteration's row:
        what judged it, and the batches' mean loss."""
        if not self.config.keep_imitating:
            return {}
        problem = row["problem"]
        self._learn_from_best(problem)
        follows, judged = self.imitation_follows(problem)
        if not follows:
            return judged
        rng = np.random.default_rng([self.config.seed, row["iteration"]])
        lessons = itertools.chain.from_iterable(    # passes over the problem's, reshuffled
            self.demonstrations.batches(self.config.imitation_batch, rng,
                                        problems=[self._lesson[problem]])
            for _ in itertools.count())
        losses = [float(self._clone(*batch)[0])
                  for batch in itertools.islice(lessons, self.config.keep_imitating)]
        return {**judged, "imitation_loss": float(np.mean(losses))}

    def logged(self) -> dict:
        """What training.json holds: the configuration, imitation epochs and iterations."""
        return {"config": dataclasses.asdict(self.config), "imitation": self.imitation,
                "iterations": self.history}

    def save(self) -> None:
        """Save the run as one unit (the module's docstring): a new checkpoint, numbered past
        every one there so that nothing is written over, and its state file, then
        training.json. Only the checkpoint this run went on from is kept besides: older
        ones, ones passed over as damaged and what killed saves left go first."""
        prefix = _next_checkpoint(self.out)
        _remove_checkpoints_but(self.out, [self._saved])
        state = {**self.logged(), "baselines": self.baselines.as_json()}
        write_atomically(_state_path(prefix), lambda file: json.dump(state, file))
        self.checkpoint.write(prefix)
        for path in _checkpoint_files(prefix):
            fsync_tree(path)
        fsync_folder(os.path.dirname(prefix))
        kept = [os.path.basename(p) for p in (self._saved, prefix) if p]
        # TensorFlow's own index (tf.train.latest_checkpoint), for tools that read the folder
        tf.compat.v1.train.update_checkpoint_state(os.path.dirname(prefix), kept[-1], kept)
        self._saved = prefix
        self._write_log()

    def _write_log(self) -> None:
        write_atomically(os.path.join(self.out, LOG),
                         lambda file: json.dump(self.logged(), file, indent=1))

    def export(self) -> str:
        """The greedy policy as a SavedModel (TF-Agents' PolicySaver) under out/policy,
        written into a staging folder and swapped in whole."""
        path = os.path.join(self.out, POLICY)
        with Staging(path) as staging, warnings.catch_warnings():
            # about saving distributions: inference never loads them
            warnings.filterwarnings("ignore", message="Encoding a StructuredValue")
            policy_saver.PolicySaver(self.agent.policy, train_step=self.step).save(
                staging.path(POLICY))
            staging.replace(POLICY)
        return path

    def best(self, problem_index: int) -> tuple:
        """(objective in us, device per group): the best any environment reached."""
        return min((env.best[problem_index] for env in self.environments), key=lambda b: b[0])

    def objectives(self, problem_index: int) -> np.ndarray:
        """The objective of every placement the episodes of one problem simulated (each move's
        rows), in the order they were simulated (the batched environments step in turn)."""
        moves = [env.views[problem_index].moves for env in self.environments]
        return np.stack(moves, axis=1).ravel()

    def _collect(self, real: Optional[RealSteps] = None):
        """One episode per environment, all of one problem; returns made real where `real`
        is given; rewards reshaped by the baseline (REINFORCE). Returns (experience,
        (problem index, mean return, what was measured for real))."""
        steps = _run_episodes(self.env, self._act)
        problem = self.environments[0].index
        rewards = steps.reward.numpy()                     # [batch, groups]
        measured = {}
        if real is not None:
            episodes = [environment.episode for environment in self.environments]
            seconds = real.seconds(problem, self.problems[problem],
                                   [e.start for e in episodes] + [e.devices for e in episodes])
            start_s, end_s = np.split(seconds, 2)
            corrected, real_returns = real_rewards(rewards, start_s, end_s)
            measured = {"real_start_s": _json_seconds(start_s),
                        "real_end_s": _json_seconds(end_s),
                        "simulated_return": float(rewards.sum(axis=1).mean()),
                        "real_return": float(real_returns.mean())}
            rewards = corrected.astype(rewards.dtype)
        returns = np.cumsum(rewards[:, ::-1], axis=1)[:, ::-1]
        if self.config.algorithm == "reinforce":
            rewards = self.baselines.reshape(
                Baselines.key(problem, self.starts[problem]), rewards, returns)
        return (steps._replace(reward=tf.constant(rewards)),
                (problem, float(returns[:, 0].mean()), measured))

    def _record(self, episodes, loss: float, seconds: float) -> dict:
        problem, mean_return, measured = episodes
        views = self.environments[0].views
        speedups = [views[p].objective.single_us / self.best(p)[0] for p in range(len(views))
                    if np.isfinite(self.best(p)[0])]     # the problems trained on so far
        row = {"iteration": self.iterations_done + 1, "problem": problem,
               **self.labels[problem], "start": self.starts[problem], "loss": loss,
               "seconds": seconds, "mean_return": mean_return,
               "end_us": float(np.mean([env.episode.value for env in self.environments])),
               "best_us": self.best(problem)[0],
               "best_speedup": float(np.mean(speedups)), **measured}
        self.history.append(row)
        return row


class GreedyActor:
    """The actor network's likeliest device, answered as inference.SavedPolicy answers."""

    def __init__(self, actor):
        self._logits = tf.function(lambda observation: actor(observation)[0].logits,
                                   reduce_retracing=True)

    def action(self, observation: dict, first: bool) -> int:
        del first      # the network keeps no state between moves
        batch = {key: value[None] for key, value in observation.items()}
        return int(tf.argmax(self._logits(batch)[0]))


def _tracked(root, path: Sequence[str]):
    """The object at a checkpoint key's path below `root` (attributes, list indices, dict
    keys, as TensorFlow's object graph names them)."""
    for part in path:
        if hasattr(root, "keys") and part in root:
            root = root[part]
        elif part.isdigit():
            root = root[int(part)]
        else:
            root = getattr(root, part)
    return root


@contextlib.contextmanager
def _seeded(seed: int):
    """TensorFlow's global seed, for the run, and Python's and NumPy's while the networks
    are made (`tf.keras.utils.set_random_seed`): Keras seeds an initializer that has no seed
    of its own from Python's global generator, so without it one seed gave other first
    weights in every process. The caller's Python and NumPy generators are given back as
    they were."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    tf.keras.utils.set_random_seed(seed)
    try:
        yield
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)


def make_agent(time_step_spec, action_spec, config: TrainingConfig, step) -> tuple:
    """(agent, its actor network): REINFORCE (Placeto's) or PPO over PlacetoNetwork(s)."""
    schedule = tf.keras.optimizers.schedules.PolynomialDecay(
        config.learning_rate, config.decay_iterations, config.final_learning_rate)
    optimizer = tf.keras.optimizers.Adam(schedule)
    actor = PlacetoNetwork(time_step_spec.observation, action_spec, config.embedding,
                           config.rounds, config.candidate_features)
    if config.algorithm == "ppo":
        agent = ppo_clip_agent.PPOClipAgent(
            time_step_spec, action_spec, optimizer=optimizer, actor_net=actor,
            value_net=PlacetoValueNetwork(time_step_spec.observation, config.embedding,
                                          config.rounds),
            entropy_regularization=config.entropy, importance_ratio_clipping=0.2,
            discount_factor=1.0, num_epochs=4, normalize_observations=False,
            normalize_rewards=False, gradient_clipping=config.gradient_clipping,
            train_step_counter=step)
    else:
        agent = reinforce_agent.ReinforceAgent(
            time_step_spec, action_spec, actor_network=actor, optimizer=optimizer,
            normalize_returns=False, gradient_clipping=config.gradient_clipping,
            entropy_regularization=config.entropy, train_step_counter=step)
    agent.initialize()
    return agent, actor


def _run_episodes(env, act):
    """Step a batch of in-step environments through one episode: a Trajectory [batch, time].

    act: a policy's `action`, traced with relaxed shapes: problems of every size share it."""
    time_step = env.reset()
    steps = []
    while True:
        action_step = act(time_step)
        next_step = env.step(action_step.action)
        steps.append(trajectory.from_transition(time_step, action_step, next_step))
        if next_step.is_last().numpy().all():
            break
        time_step = next_step
    return tf.nest.map_structure(lambda *xs: tf.stack(xs, axis=1), *steps)


class Baselines:
    """Per problem, start and step index, the mean return of the last `window` episodes
    there. A problem's first episodes, with none before them, are measured against their own
    mean: against zero, every move of a good episode would look good."""

    def __init__(self, window: int):
        self.window = window
        self.seen: dict = {}          # key -> list of return arrays

    @staticmethod
    def key(problem: int, start: str = "random") -> str:
        """Where a problem's returns are kept: episodes from another start (a later stage of
        training from the fast placers' decision) return other amounts."""
        return str(problem) if start == "random" else f"{problem}/{start}"

    def reshape(self, key: str, rewards: np.ndarray, returns: np.ndarray) -> np.ndarray:
        """Rewards [episodes, steps] whose undiscounted returns are G_t - b_t; then the
        episodes join the mean."""
        past = self.seen.get(key)
        b = np.mean(past if past else returns, axis=0)
        self.seen[key] = (past or []) + list(returns)
        del self.seen[key][:-self.window]
        return (rewards - b + np.append(b[1:], 0.0)).astype(rewards.dtype)

    def as_json(self) -> dict:
        return {k: [list(map(float, e)) for e in v] for k, v in self.seen.items()}

    @staticmethod
    def seen_from_json(saved: dict) -> dict:
        """What as_json wrote, as `seen`; ValueError where it is not that."""
        try:
            return {str(k): [np.array(e, dtype=float) for e in v] for k, v in saved.items()}
        except (TypeError, AttributeError) as error:
            raise ValueError(f"not baselines: {error}") from None


def _json_seconds(seconds: np.ndarray) -> list:
    """Real step times for training.json: None where the placement failed to run."""
    return [float(s) if np.isfinite(s) else None for s in seconds]


def iterations_by_setting(history: Sequence[dict]) -> pd.DataFrame:
    """Per link and start (the settings a run mixes): its iterations, their mean return, and
    after how many of them imitation went on (`keep_imitating`). Logs written before the
    iterations carried their link are read by start alone."""
    table = pd.DataFrame(history)
    keys = [key for key in ("link", "start") if key in table]
    imitated = (table["imitation_loss"].notna() if "imitation_loss" in table
                else pd.Series(False, index=table.index))
    return (table.assign(imitated=imitated).groupby(keys, sort=False)
            .agg(iterations=("iteration", "size"), imitated=("imitated", "sum"),
                 mean_return=("mean_return", "mean")).reset_index())


def read_log(path: str) -> dict:
    """A training.json ({"iterations": []} where there is none); InputError naming one that
    does not parse."""
    if not os.path.isfile(path):
        return {"iterations": []}
    try:
        logged = _read_json(path)
    except ValueError as error:
        raise InputError(f"{path} does not parse ({error})") from None
    if not isinstance(logged, dict):
        raise InputError(f"{path} is not a training log")
    return logged


def _read_json(path: str):
    with open(path, encoding="utf-8") as file:
        return json.load(file)


# ---- the training folder and its checkpoints ------------------------------------------------
def check_training_folder(out: str) -> None:
    """Refuse to train in `out` where it holds something else: training writes its files
    there (policy/, learning_curve.png, ...) and must not take the place of a user's. A
    missing or empty folder starts a run; one with checkpoints/ or training.json resumes."""
    if not os.path.exists(out):
        return
    if not os.path.isdir(out):
        raise InputError(f"--out {out}: a file, not a folder to train in")
    if os.listdir(out) and not (os.path.isdir(os.path.join(out, CHECKPOINTS))
                                or os.path.isfile(os.path.join(out, LOG))):
        raise InputError(f"--out {out}: holds files and is not a training folder (no "
                         f"{CHECKPOINTS}/ or {LOG}); give a new or empty folder, or one that "
                         "a run trained in")


_CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)")    # then .index, .data-*, _temp/ or .json


def _state_path(prefix: str) -> str:
    """The state file of the checkpoint `prefix` (out/checkpoints/ckpt-N): out/state/ckpt-N.json."""
    out = os.path.dirname(os.path.dirname(prefix))
    return os.path.join(out, STATE, os.path.basename(prefix) + ".json")


def _checkpoint_files(prefix: str) -> list:
    folder, name = os.path.split(prefix)
    return [os.path.join(folder, entry) for entry in os.listdir(folder)
            if (match := _CHECKPOINT_NAME.match(entry)) and match.group() == name]


def _checkpoints(out: str) -> list:
    """The checkpoints saved under `out` (those with an index, whole or not), newest first."""
    folder = os.path.join(out, CHECKPOINTS)
    names = [entry.removesuffix(".index") for entry in _entries(folder)
             if entry.endswith(".index")]
    return sorted((os.path.join(folder, name) for name in names
                   if _CHECKPOINT_NAME.fullmatch(name)),
                  key=lambda prefix: int(prefix.rpartition("-")[2]), reverse=True)


def _next_checkpoint(out: str) -> str:
    """The prefix of the next checkpoint under `out`: numbered past every checkpoint and
    state file there, whole or not."""
    numbers = [int(match.group(1)) for folder in (CHECKPOINTS, STATE)
               for entry in _entries(os.path.join(out, folder))
               if (match := _CHECKPOINT_NAME.match(entry))]
    return os.path.join(out, CHECKPOINTS, f"ckpt-{max(numbers, default=0) + 1}")


def _entries(folder: str) -> list:
    return os.listdir(folder) if os.path.isdir(folder) else []


def _remove_checkpoints_but(out: str, kept: Sequence[Optional[str]]) -> None:
    """Remove every checkpoint under `out` but `kept`, with its state file, what killed
    saves left (parts of checkpoints, temporary state files) and an older version's
    baselines once no checkpoint kept needs them."""
    names = {os.path.basename(prefix) for prefix in kept if prefix}
    checkpoints, states = os.path.join(out, CHECKPOINTS), os.path.join(out, STATE)
    removed = [os.path.join(checkpoints, entry) for entry in os.listdir(checkpoints)
               if (match := _CHECKPOINT_NAME.match(entry)) and match.group() not in names]
    removed += [os.path.join(states, entry) for entry in os.listdir(states)
                if entry.removesuffix(".json") not in names]
    if all(os.path.isfile(_state_path(os.path.join(checkpoints, name))) for name in names):
        removed += [path for path in [os.path.join(checkpoints, BASELINES)]
                    if os.path.isfile(path)]
    for path in removed:
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


class _Damaged(Exception):
    """Why a checkpoint or what goes with it cannot be read back whole."""


def _newest_whole(out: str, read: Callable[[str], object]) -> tuple:
    """(prefix, read(prefix)) of the newest checkpoint under `out` whose files read back
    whole and for which `read` (what goes with it) raises no _Damaged; each one passed over
    is named in one line. (None, None) where nothing was saved; InputError where nothing
    saved is whole."""
    passed = []
    for prefix in _checkpoints(out):
        try:
            _read_back(prefix)
            return prefix, read(prefix)
        except _Damaged as damage:
            log.warning(f"{prefix} is damaged ({damage}): passed over for the one before it")
            passed.append(f"{os.path.basename(prefix)}: {damage}")
    if passed:
        raise InputError(f"{out}: none of its checkpoints is whole ({'; '.join(passed)}); "
                         "move it aside to start anew")
    return None, None


def _read_back(prefix: str) -> None:
    """Read every tensor of a checkpoint (their checksums checked): _Damaged where its files
    are cut short or corrupt."""
    try:
        reader = tf.train.load_checkpoint(prefix)
        for key in reader.get_variable_to_shape_map():
            reader.get_tensor(key)
    except (tf.errors.OpError, IndexError, ValueError) as error:
        raise _Damaged(str(error).strip().splitlines()[0]) from None


def _saved_state(prefix: str) -> tuple:
    """(imitation epochs, iterations, baselines) saved with a checkpoint: from its state
    file; for an older version's checkpoint, from training.json and baselines.json, each
    named and left out where it does not parse (that layout kept one of each)."""
    path = _state_path(prefix)
    if os.path.isfile(path):
        try:
            state = _read_json(path)
            imitation, iterations = state["imitation"], state["iterations"]
            if not isinstance(imitation, list) or not isinstance(iterations, list):
                raise ValueError("its log is not lists of rows")
            return imitation, iterations, Baselines.seen_from_json(state["baselines"])
        except (ValueError, KeyError, TypeError) as error:
            raise _Damaged(f"its state {path} does not parse: {error}") from None
    out = os.path.dirname(os.path.dirname(prefix))
    logged, baselines = {}, {}
    try:
        logged = read_log(os.path.join(out, LOG))
    except InputError as error:
        log.warning(f"{error}: resuming {prefix} without its log of iterations")
    path = os.path.join(os.path.dirname(prefix), BASELINES)
    if os.path.isfile(path):
        try:
            baselines = Baselines.seen_from_json(_read_json(path))
        except ValueError as error:
            log.warning(f"{path} does not parse ({error}): resuming {prefix} with new "
                        "baselines")
    return logged.get("imitation", []), logged.get("iterations", []), baselines
