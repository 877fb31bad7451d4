"""REINFORCE's baseline: returns turned into advantages, per problem and start."""

import json

import numpy as np

from tf_placeto.policy.baselines import Baselines


def _returns(rewards):
    return np.cumsum(rewards[:, ::-1], axis=1)[:, ::-1]


def test_baselines_turn_returns_into_advantages():
    """The first episodes of a problem are measured against their own mean (one better, one
    worse), the next against the mean of those before."""
    baselines = Baselines(window=2)
    first = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 1.0]], np.float32)   # returns 6 5 3; 2 1 1
    shaped = baselines.reshape(Baselines.key(0), first, _returns(first))
    np.testing.assert_allclose(_returns(shaped), [[2, 2, 1], [-2, -2, -1]])
    second = np.array([[0.0, 0.0, 1.0]], np.float32)
    shaped = baselines.reshape(Baselines.key(0), second, _returns(second))
    np.testing.assert_allclose(_returns(shaped), [[1 - 4, 1 - 3, 1 - 2]])


def test_each_start_of_a_problem_keeps_its_own_baseline():
    """Episodes from the fast placers' decision return less than those from a random start:
    a later stage from another start must not be measured against the earlier stage's."""
    baselines = Baselines(window=4)
    from_random = np.array([[5.0, 5.0]], np.float32)
    baselines.reshape(Baselines.key(0), from_random, _returns(from_random))
    resumed = Baselines(window=4)
    resumed.seen = Baselines.seen_from_json(json.loads(json.dumps(baselines.as_json())))
    from_fast = np.array([[0.5, 0.5], [0.0, 0.5]], np.float32)
    shaped = resumed.reshape(Baselines.key(0, "fast"), from_fast, _returns(from_fast))
    np.testing.assert_allclose(_returns(shaped), [[0.25, 0.0], [-0.25, 0.0]])
    again = resumed.reshape(Baselines.key(0), from_random, _returns(from_random))
    np.testing.assert_allclose(_returns(again), [[0.0, 0.0]])      # the random start's own
