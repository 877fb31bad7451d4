"""Training the Placeto policy with TF-Agents: REINFORCE (the paper's) or PPO.

Each iteration takes the next problem and runs `episodes` episodes of it side by side (a
batch of environments stepping together, Placeto's parallel workers), then takes one gradient
step on all of them (agent.py). REINFORCE uses Placeto's baseline (baselines.py): for each
problem and each step index, the mean return of the last `baseline_window` episodes at that
step. With `keep_imitating`, imitation (imitation.py) goes on as a regulariser: after an
iteration on a problem where the policy's greedy episode ends slower than the problem's lesson
(or, with `keep_imitating_where` "one-device", on a problem whose lesson is on one device), a
few batches of that problem's demonstrations. The lesson is the demonstrated decision until an
episode meets a placement faster by LESSON_MARGIN; that placement is the lesson from then on
(self-imitation), so a teacher that reinforcement learning beats does not hold the policy
back. Trained on several settings at once, reinforcement learning keeps what pays in most of
them and forgets what imitation taught for the others (the cluster's gathering, lost to k80's
iterations: docs/results/policy.md, "Training on both settings at once"); this brings it back
only where the policy falls behind its lesson. Given real.RealSteps, iterations take only
problems on the runtime's devices and their episodes' returns are measured for real (real.py):
training's last, optional stage.

A run lives in one folder, saved as one unit per checkpoint and resumed from the newest whole
one (checkpoints.py).

This module loads TF-Agents and TensorFlow when it is imported.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
import warnings
from typing import Callable, NamedTuple, Optional, Sequence

import numpy as np

from tf_placeto.errors import InputError
from tf_placeto.files import Staging, write_atomically
from tf_placeto.policy import require_tf_agents

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

import tensorflow as tf
from tf_agents.environments import batched_py_environment, tf_py_environment
from tf_agents.policies import policy_saver

from tf_placeto.policy import checkpoints
from tf_placeto.policy.agent import (GreedyActor, TrainingConfig, make_agent, run_episodes, seeded,
                                    traced_for_every_size)
from tf_placeto.policy.baselines import Baselines
from tf_placeto.policy.checkpoints import (LOG, POLICY, STATE, SUMMARIES,
                                           check_training_folder)
from tf_placeto.policy.environment import PlacementEnvironment
from tf_placeto.policy.imitation import Demonstrations, accuracy, cloning_step, imitate
from tf_placeto.policy.episode import greedy_walk
from tf_placeto.policy.objective import Objective
from tf_placeto.policy.real import RealSteps, real_rewards
from tf_placeto.policy.starts import IMITATE_WHERE

IMITATION_LEARNING_RATE = 1e-3
LESSON_MARGIN = 0.01        # how much faster a placement met must be to become the lesson


class _Lesson(NamedTuple):
    """What imitation teaches on one problem: the decision, the teacher whose moves show it
    (None: walks towards the decision), and whether it is also taught along the network's own
    walks (DAgger)."""
    problem: object
    decision: np.ndarray
    teacher: object
    followed: bool


class Trainer:
    """A TF-Agents agent, its environments and its on-disk state, for a set of problems."""

    def __init__(self, problems: Sequence, out: str, config: TrainingConfig = TrainingConfig(),
                 initial: Sequence = None, starts: Sequence[str] = None,
                 labels: Sequence[dict] = None):
        """initial: per problem, the fixed start placement of its episodes, or None (a random
        one, as Placeto's). starts: per problem, the name of that start (starts.START_KINDS),
        logged with each iteration and keeping its own baseline (default: "random" where
        initial is None, else "given"). labels: per problem, what names it (its graph, device
        count and link, as training_api.training_problems gives them), logged with each iteration so
        that the log can be read by setting."""
        if config.algorithm not in ("reinforce", "ppo"):
            raise ValueError(f"algorithm must be 'reinforce' or 'ppo', not {config.algorithm!r}")
        if config.keep_imitating_where not in IMITATE_WHERE:
            raise ValueError(f"keep_imitating_where must be one of {IMITATE_WHERE}, not "
                             f"{config.keep_imitating_where!r}")
        check_training_folder(out)
        checkpoints.hold(out)
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
        with seeded(config.seed):
            self.agent, self.actor = make_agent(self.env.time_step_spec(),
                                                self.env.action_spec(), config, self.step)
        self.baselines = Baselines(config.baseline_window)
        self.imitation_optimizer = tf.keras.optimizers.Adam(IMITATION_LEARNING_RATE)
        self.checkpoint = tf.train.Checkpoint(
            agent=self.agent, policy=self.agent.policy, train_step=self.step,
            imitation_optimizer=self.imitation_optimizer)
        os.makedirs(os.path.join(out, STATE), exist_ok=True)     # checkpoints/: hold() made it
        self.history, self.imitation = [], []
        self._saved = None          # the checkpoint this run goes on from: resumed, or saved last
        self._resume()
        self.writer = tf.summary.create_file_writer(os.path.join(out, SUMMARIES))
        self.demonstrations = None        # until demonstrate()
        self._clone = cloning_step(self.actor, self.imitation_optimizer)
        self._greedy = GreedyActor(self.actor)
        # [episodes, moves] of any problem's size
        self._train = traced_for_every_size(lambda batch: self.agent.train(batch),
                                            self.agent.collect_data_spec, outer=(None, None))
        self._act = traced_for_every_size(lambda step: self.agent.collect_policy.action(step),
                                          self.env.time_step_spec())

    def _resume(self) -> None:
        """Go on from the newest whole checkpoint under `out`, with its log and baselines; a
        new run where nothing was saved (from `warm_start`'s weights, if given)."""
        self._saved, state = checkpoints.newest_whole(self.out, checkpoints.saved_state)
        if self._saved is None:
            if self.config.warm_start:
                # the actor as REINFORCE and PPO keep it, and PPO's critic (where both runs
                # have one)
                checkpoints.take_weights(self.config.warm_start, {
                    "_actor_network": self.actor, "_actor_net": self.actor,
                    "_value_net": getattr(self.agent, "_value_net", None)})
                if self.config.step_change_weight is not None:
                    self.actor.step_change_weight.assign(self.config.step_change_weight)
            return
        self.imitation, self.history, self.baselines.seen = state
        # the imitation optimizer's slots are restored when imitation builds them (resume);
        # a reinforcement stage or fine-tuning never does, and TensorFlow would warn per slot
        try:
            self.checkpoint.restore(self._saved).expect_partial()
        except (ValueError, tf.errors.InvalidArgumentError) as error:
            raise InputError(f"{self.out} trained a network of another size than this run's "
                             "(--embedding): give the same, or another --out") from error
        if os.path.isfile(checkpoints.state_path(self._saved)):
            self._write_log()    # training.json: the log of the checkpoint this run goes on from

    @property
    def checkpointed(self) -> bool:
        """Whether the run has a checkpoint to go on from (resumed, or saved since)."""
        return self._saved is not None

    @property
    def iterations_done(self) -> int:
        """Iterations logged (and checkpointed with them); not the agent's train step, which
        PPO advances once per epoch of each iteration."""
        return len(self.history)

    def demonstrate(self, decisions: Sequence, starts: int = 2,
                    teachers: Sequence = None, followed: Sequence[bool] = None,
                    passes: int = 1) -> None:
        """Record what imitation teaches: each group moved to its device in `decisions` (one
        per problem; imitation.py: walks from `starts` random starts, the decision and one
        device), or, where `teachers` (one per problem, or None) has one, that teacher's
        moves from those starts (Demonstrations.record). A problem posed from several starts
        is recorded once. Where `followed` (one per problem) is true, each epoch of
        imitation also teaches the lesson along the network's own greedy walks from
        `starts` random starts, walked again before the epoch (DAgger: imitate()), each of up
        to `passes` passes over the groups (Demonstrations.record)."""
        if passes < 1:
            raise ValueError(f"passes must be at least 1, not {passes}")
        lessons = {}
        for index, (problem, decision) in enumerate(zip(self.problems, decisions)):
            lessons.setdefault(id(problem), _Lesson(problem, decision,
                                                    teachers[index] if teachers else None,
                                                    bool(followed and followed[index])))
        self._lessons = list(lessons.values())
        self.demonstrations = self._recorded(self._lessons, seed=self.config.seed,
                                             starts=starts)
        index = {key: i for i, key in enumerate(lessons)}
        self._lesson = [index[id(problem)] for problem in self.problems]
        taught_us = [Objective(lesson.problem)(np.asarray(lesson.decision))[0]
                     for lesson in self._lessons]
        self.lesson_us = [taught_us[lesson] for lesson in self._lesson]    # per problem
        self._demonstration_starts, self._own_passes = starts, passes

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

        while len(self.imitation) < epochs:
            epoch, extra = len(self.imitation) + 1, {}
            demonstrations = self.demonstrations
            if any(lesson.followed for lesson in self._lessons):
                own_walks = self._along_own_walks(epoch)
                demonstrations = demonstrations.joined(own_walks)
                extra = {"own_walk_moves": len(own_walks),
                         "own_walk_accuracy": accuracy(self.actor, own_walks)}

            def learned(row):
                row = {**row, **extra}
                self.imitation.append(row if taught is None else {**row, "taught": taught})
                self.save()
                progress(row)

            imitate(self._clone, demonstrations, epoch, seed=self.config.seed,
                    first_epoch=epoch, progress=learned)
        return self.imitation

    def _along_own_walks(self, epoch: int) -> Demonstrations:
        """The followed lessons along the greedy walks of the network as it is now: where its
        own moves lead, what the lesson does there."""
        return self._recorded([lesson for lesson in self._lessons if lesson.followed],
                              seed=self.config.seed + epoch, starts=self._demonstration_starts,
                              follower=self._greedy, passes=self._own_passes)

    @staticmethod
    def _recorded(lessons: Sequence[_Lesson], seed: int, starts: int,
                  follower=None, passes: int = 1) -> Demonstrations:
        """The moves that teach `lessons` (Demonstrations.record)."""
        return Demonstrations.record([lesson.problem for lesson in lessons],
                                     [lesson.decision for lesson in lessons], starts,
                                     seed=seed, teachers=[lesson.teacher for lesson in lessons],
                                     follower=follower, passes=passes)

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
        """What training.json holds: the configuration, imitation epochs and iterations, and
        the weight the direct path from the step change has now (None where the network
        reads no step change): config.step_change_weight is only where it began."""
        return {"config": dataclasses.asdict(self.config), "imitation": self.imitation,
                "iterations": self.history, "step_change_weight": self.step_change_weight}

    @property
    def step_change_weight(self) -> Optional[float]:
        """The direct path's weight as training has left it (None: the network has none)."""
        try:
            return float(self.actor.step_change_weight.numpy())
        except ValueError:      # a network without the path
            return None


    def save(self) -> None:
        """Save the run as one unit (policy/checkpoints.py), then training.json."""
        state = {**self.logged(), "baselines": self.baselines.as_json()}
        self._saved = checkpoints.save(self.out, self.checkpoint, state, self._saved)
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
        steps = run_episodes(self.env, self._act)
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


def _json_seconds(seconds: np.ndarray) -> list:
    """Real step times for training.json: None where the placement failed to run."""
    return [float(s) if np.isfinite(s) else None for s in seconds]
