"""The integer program's builder and its two interfaces to HiGHS."""

import numpy as np
import pytest

from tests.helpers import run_python
from tf_placeto.placers.optimal.program import Program


def knapsack():
    """Pick items of weights 3, 4, 5, 6 (at most 10 in all) for the most value 4, 5, 7, 8:
    the goal is the value left out, at least 24 minus what is picked; optimum 11 (weights 4
    and 6), and {3, 4} (value 9, 15 left out) is feasible but not optimal."""
    program = Program()
    take = program.variables(4, upper=1.0, integral=True)
    left_out = program.variables(1)
    program.constrain(np.zeros(1), (np.array([3.0, 4.0, 5.0, 6.0]), take[None, :]),
                      upper=np.full(1, 10.0))
    program.constrain(np.full(1, 24.0), (1.0, left_out), (np.array([4.0, 5.0, 7.0, 8.0]),
                                                          take[None, :]))
    return program, take, left_out


@pytest.mark.parametrize("interface", ["highspy", "scipy"])
def test_both_interfaces_find_the_optimum_and_prove_it(interface):
    program, take, left_out = knapsack()
    solved = program.minimise(left_out, time_limit=10.0, interface=interface)
    assert solved.interface == interface and not solved.infeasible
    assert solved.values[left_out][0] == pytest.approx(11.0)
    assert np.round(solved.values[take]) @ np.array([3, 4, 5, 6]) <= 10
    assert solved.bound == pytest.approx(11.0)


def test_the_start_is_the_first_incumbent_and_progress_follows_the_search():
    program, take, left_out = knapsack()
    seen = []
    solved = program.minimise(left_out, time_limit=10.0, interface="highspy",
                              start=(take, np.array([1.0, 1.0, 0.0, 0.0])),
                              progress=lambda incumbent, bound: seen.append((incumbent, bound)))
    incumbents = [incumbent for incumbent, _ in seen if np.isfinite(incumbent)]
    assert incumbents[0] == pytest.approx(15.0)           # {3, 4}, completed by HiGHS
    assert incumbents[-1] == pytest.approx(11.0)
    assert all(bound <= incumbent + 1e-9 for incumbent, bound in seen)
    assert solved.values[left_out][0] == pytest.approx(11.0)


def test_an_infeasible_program_says_so():
    program = Program()
    x = program.variables(1, upper=1.0, integral=True)
    program.constrain(np.full(1, 2.0), (1.0, x))
    for interface in ("highspy", "scipy"):
        solved = program.minimise(x, time_limit=5.0, interface=interface)
        assert solved.infeasible and solved.values is None


def test_highs_banner_stays_off_stdout():
    """HiGHS writes a banner to descriptor 1 on its first instance in a process; a command's
    --json output is on stdout."""
    result = run_python(
        "import numpy as np\n"
        "from tests.placers.test_program import knapsack\n"
        "program, take, left_out = knapsack()\n"
        "solved = program.minimise(left_out, time_limit=5.0, interface='highspy')\n"
        "print(solved.values[left_out][0])\n")
    assert result.stdout.strip() == "11.0"
    assert "HiGHS" in result.stderr
