"""The TF-Agents agent that training drives: its configuration, REINFORCE (the paper's) or PPO
over the Placeto network, a batch of episodes stepped together, and the greedy actor.

Adam with the learning rate decayed from 1e-3 to 1e-4, gradients clipped to a global norm of
1.25, an entropy bonus. This module loads TF-Agents and TensorFlow when it is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from typing import Optional, Sequence

import numpy as np

from tf_placeto.policy import require_tf_agents

require_tf_agents()     # import guard: tf-agents needs legacy Keras, before TensorFlow loads

import tensorflow as tf
from tf_agents.agents.ppo import ppo_clip_agent
from tf_agents.agents.reinforce import reinforce_agent
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import trajectory

from tf_placeto.policy.checkpoints import warm_start_folders
from tf_placeto.policy.network import PlacetoNetwork, PlacetoValueNetwork


@dataclasses.dataclass
class TrainingConfig:
    algorithm: str = "reinforce"         # or "ppo"
    ppo_epochs: int = 4                  # PPO: passes over each iteration's episodes
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
    warm_start: Optional[Sequence[str]] = None   # training directories whose weights (of
    #                                              several: their mean) a new run takes
    keep_imitating: int = 0              # imitation batches after an iteration that lags
    keep_imitating_where: str = "behind"     # which iterations lag (starts.IMITATE_WHERE)
    imitation_batch: int = 64
    candidate_features: Optional[int] = None    # device-row columns read (None: all; specs.py)
    step_change_weight: Optional[float] = None   # the weight of the network's direct path
    #                                      from the simulated step change as the run begins
    #                                      (network.py; None: the warm start's own, else 0)

    def __post_init__(self):
        self.warm_start = warm_start_folders(self.warm_start)


def make_agent(time_step_spec, action_spec, config: TrainingConfig, step) -> tuple:
    """(agent, its actor network): REINFORCE (Placeto's) or PPO over PlacetoNetwork(s)."""
    schedule = tf.keras.optimizers.schedules.PolynomialDecay(
        config.learning_rate, config.decay_iterations, config.final_learning_rate)
    optimizer = tf.keras.optimizers.Adam(schedule)
    actor = PlacetoNetwork(time_step_spec.observation, action_spec, config.embedding,
                           config.rounds, config.candidate_features,
                           config.step_change_weight or 0.0)
    if config.algorithm == "ppo":
        agent = ppo_clip_agent.PPOClipAgent(
            time_step_spec, action_spec, optimizer=optimizer, actor_net=actor,
            value_net=PlacetoValueNetwork(time_step_spec.observation, config.embedding,
                                          config.rounds),
            entropy_regularization=config.entropy, importance_ratio_clipping=0.2,
            discount_factor=1.0, num_epochs=config.ppo_epochs, normalize_observations=False,
            normalize_rewards=False, gradient_clipping=config.gradient_clipping,
            train_step_counter=step)
    else:
        agent = reinforce_agent.ReinforceAgent(
            time_step_spec, action_spec, actor_network=actor, optimizer=optimizer,
            normalize_returns=False, gradient_clipping=config.gradient_clipping,
            entropy_regularization=config.entropy, train_step_counter=step)
    agent.initialize()
    # the optimizer's slots made now, not in the first traced train step, which TensorFlow
    # would then trace twice (a trace of the whole agent's step costs seconds); in the order
    # each agent's train step gives them, which checkpoints number them by
    if config.algorithm == "ppo":
        trained = sorted({id(v): v for v in agent.trainable_variables}.values(),
                         key=lambda v: v.name)
    else:
        trained = actor.trainable_weights
    optimizer.build(trained)
    return agent, actor


@contextlib.contextmanager
def seeded(seed: int):
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


def traced_for_every_size(function, *specs, outer: tuple = (None,)):
    """`function` as a tf.function traced once, for inputs of every size: `specs` (nests of
    TensorSpecs, their own sizes open) with `outer` dimensions of open size in front. A
    trace of the agent's step costs seconds; traced per shape, every problem size paid it.
    Without AutoGraph: the networks and agents loop over Python numbers only, and its
    conversion only lengthens the trace."""
    return tf.function(function, autograph=False, input_signature=[
        tensor_spec.add_outer_dims_nest(spec, outer) for spec in specs])


def run_episodes(env, act):
    """Step a batch of in-step environments through one episode: a Trajectory [batch, time].

    act: a policy's `action`, traced for every size (traced_for_every_size)."""
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


class GreedyActor:
    """The actor network's likeliest device, answered as inference.SavedPolicy answers."""

    def __init__(self, actor):
        self._logits = traced_for_every_size(lambda observation: actor(observation)[0].logits,
                                             actor.input_tensor_spec)

    def action(self, observation: dict, first: bool) -> int:
        del first      # the network keeps no state between moves
        batch = {key: value[None] for key, value in observation.items()}
        return int(tf.argmax(self._logits(batch)[0]))
