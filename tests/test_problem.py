"""PlacementProblem: pins hold groups on a device, through coarsening too."""

import pytest

from tests.test_placers import build_problem, grouped_example
from tf_placeto import placers


@pytest.fixture(scope="module")
def problem():
    return build_problem(grouped_example("small_cnn", 32), 2)


def test_pinned_groups_stay_where_pinned_whatever_the_placer(problem):
    pins = {0: 1, 5: 1, problem.n_groups - 1: 0}
    pinned = problem.with_pins(pins)
    assert not pinned.allowed[0, 0] and pinned.allowed[0, 1]
    assert problem.allowed[0, 0]                        # the original is untouched
    for method in ("round_robin", "m_etf", "heft", "metis"):
        decision = placers.place(method, pinned).group_devices
        assert all(decision[g] == d for g, d in pins.items()), method


def test_coarsening_keeps_the_pins(problem):
    pinned = problem.with_pins({3: 1})
    coarse, chunk_of_group = pinned.coarsened(8)
    assert coarse.n_groups <= 8
    assert not coarse.allowed[chunk_of_group[3], 0] and coarse.allowed[chunk_of_group[3], 1]


def test_a_pin_without_a_kernel_is_refused(problem):
    barred = problem.with_pins({2: 0})
    with pytest.raises(ValueError, match="no kernel"):
        barred.with_pins({2: 1})
