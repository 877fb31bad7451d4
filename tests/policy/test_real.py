"""Training's real stage: episodes whose returns are measured for real."""

import numpy as np
import pytest

from tf_placeto.policy.real import real_rewards


def test_the_last_move_takes_the_difference_so_that_the_return_is_the_real_speedup():
    rewards = np.array([[0.1, 0.2, -0.05], [0.0, 0.3, 0.1], [0.2, 0.0, 0.0]])
    start_s = np.array([2.0, 2.0, 2.0])
    end_s = np.array([1.5, 2.5, np.nan])           # the third end failed to run
    corrected, returns = real_rewards(rewards, start_s, end_s)
    assert returns == pytest.approx([0.25, -0.25, 0.2])
    assert corrected.sum(axis=1) == pytest.approx(returns)
    assert (corrected[:, :-1] == rewards[:, :-1]).all()     # the moves keep their credit
    assert (corrected[2] == rewards[2]).all()
