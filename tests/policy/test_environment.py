"""The placement MDP as a TF-Agents environment: episodes, rewards, restarts."""

import numpy as np
import pytest

import tensorflow as tf
from tf_agents.specs import tensor_spec

from tf_placeto.policy import specs
from tf_placeto.policy.environment import PlacementEnvironment


def test_an_episode_places_every_group_once_and_returns_the_speedup(policy_problems):
    problem = policy_problems[0]
    env = PlacementEnvironment([problem], seed=0)
    step = env.reset()
    for key, spec in env.observation_spec().items():
        assert tensor_spec.from_spec(spec).is_compatible_with(
            tf.constant(step.observation[key])), key
    assert step.observation["features"].shape[0] == problem.n_groups
    assert step.observation["candidates"].shape[0] == problem.n_devices
    rewards = []
    for g in range(problem.n_groups):
        assert step.observation["features"][g, specs.CURRENT] == 1.0
        assert not step.is_last()
        step = env.step(np.int32(g % 2))
        rewards.append(float(step.reward))
    assert step.is_last()
    final = problem.simulate(np.arange(problem.n_groups) % 2).step_time_us
    first = env.episode.first
    assert sum(rewards) == pytest.approx((first - final) / first, rel=1e-4)
    assert env.best[0][0] <= min(first, final) + 1e-6


def test_episodes_go_on_from_the_previous_placement_or_restart_from_a_fixed_one(policy_problems):
    problem = policy_problems[1]
    initial = np.zeros(problem.n_groups, np.int64)
    for restart in ("fixed", "previous"):
        env = PlacementEnvironment([problem], seed=0, restart=restart, initial=[initial])
        firsts, lasts = [], []
        for _ in range(2):
            env.reset()
            firsts.append(env.episode.devices.copy())
            for group in range(problem.n_groups):
                env.step(np.int32((group + 1) % problem.n_devices))
            lasts.append(env.episode.devices.copy())
        np.testing.assert_array_equal(firsts[0], initial)
        np.testing.assert_array_equal(firsts[1], initial if restart == "fixed" else lasts[0])
    with pytest.raises(ValueError, match="restart must be one of"):
        PlacementEnvironment([problem], restart="best")


def test_episodes_may_be_drawn_from_some_problems_only(policy_problems):
    env = PlacementEnvironment(policy_problems, seed=0)
    drawn = []
    for draw_from in ([1], None):
        env.draw_from(draw_from)
        for _ in range(4):
            env.reset()
            drawn.append(env.index)
    assert drawn[:4] == [1] * 4 and set(drawn[4:]) == set(range(len(policy_problems)))
