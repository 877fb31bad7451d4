"""The list schedulers (m_etf, m_sct, heft) on a graph with branches that can run side by
side."""

import pytest

from tests.helpers import build_problem, step_us
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


@pytest.mark.parametrize("method", ["m_etf", "m_sct", "heft"])
def test_under_throughput_list_schedulers_stream_faster_than_their_latency_decisions(
        method, small_cnn_groups, mlp_groups):
    """Under throughput each list scheduler keeps the faster stream of its steady-state and
    one-step schedules: never slower than its one-step decision, and the steady state wins
    strictly on most of both graphs at 2 and 4 devices. No stream beats the bound."""
    steady_wins = 0
    for groups in (small_cnn_groups, mlp_groups):
        for n_devices in (2, 4):
            latency = build_problem(groups, n_devices)
            throughput = latency.with_objective("throughput")
            for_one_step = methods.place(method, latency).group_devices
            decided = methods.place(method, throughput)
            streamed = throughput.evaluate(decided.group_devices).us_per_step
            one_step = throughput.evaluate(for_one_step).us_per_step
            assert streamed <= one_step
            assert streamed >= throughput.lower_bound_us()
            steady_wins += decided.info["schedule"] == "steady state" and streamed < one_step
    assert steady_wins >= 3
