"""The list schedulers (m_etf, m_sct, heft) on a graph with branches that can run side by
side."""

import pytest

from tests.helpers import step_us
from tf_placeto import methods


@pytest.mark.parametrize("method", ["m_etf", "m_sct", "heft"])
def test_list_schedulers_use_the_branches_of_a_wide_graph(method, two_devices, four_devices):
    """small_cnn's two branches can run side by side: dealing out slices of the step cannot
    do better than scheduling them, and a schedule comes within 20% of the bound."""
    for problem in (two_devices, four_devices):
        scheduled = step_us(problem, methods.place(method, problem).group_devices)
        dealt = step_us(problem, methods.place("round_robin", problem).group_devices)
        assert scheduled <= dealt
        assert scheduled <= 1.2 * problem.lower_bound_us()
