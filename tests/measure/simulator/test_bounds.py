"""The lower bound: a chain's critical path, and never above a simulated step."""

import numpy as np
import pytest

from tests.measure.simulator.cases import chain, random_dag
from tf_placeto.measure.simulator import lower_bound_us, simulate


def test_lower_bound_of_a_chain_is_its_critical_path():
    problem = chain([3.0, 5.0, 7.0], n_devices=4, overhead=1.0)
    assert lower_bound_us(problem) == pytest.approx(18.0)
    assert simulate(problem, np.zeros(3, np.int64)).step_time_us == pytest.approx(18.0)


def test_lower_bound_never_exceeds_a_simulated_step():
    rng = np.random.default_rng(7)
    for _ in range(5):
        problem = random_dag(rng)
        bound = lower_bound_us(problem)
        assert bound > 0
        for placement in rng.integers(0, problem.n_devices, size=(20, problem.n_ops)):
            assert bound <= simulate(problem, placement).step_time_us + 1e-9
