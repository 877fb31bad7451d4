"""Running a placer under a memory limit: who plans again on smaller budgets, and the time
limit over all tries."""

import dataclasses

from tests.helpers import build_problem
from tf_placeto import methods


def test_searching_placers_are_not_rerun_on_smaller_memory_budgets(small_cnn_groups,
                                                                   two_devices, monkeypatch):
    """The RNN planner judges memory in the simulator: one search of its budget, even where
    its answer does not fit (a hopeless capacity)."""
    calls = []
    planner = methods.spec("rnn")

    def counted(problem, **options):
        calls.append(problem.capacity_bytes.copy())
        return planner.place(problem, **options)

    monkeypatch.setitem(methods._SPECS, "rnn", dataclasses.replace(planner, place=counted))
    capacity = 0.2 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    result = methods.place("rnn", capped, budget=16)
    assert result.info["memory_margin"] == 1.0 and result.info["evaluations"] == 16
    assert len(calls) == 1 and (calls[0] == capped.capacity_bytes).all()


def test_a_time_limit_bounds_every_try_together(small_cnn_groups, two_devices, monkeypatch):
    """Under a memory limit the exact placer may plan again on smaller budgets; each try gets
    what is left of its time limit, not the whole of it."""
    limits = []
    exact = methods.spec("optimal")

    def recorded(problem, **options):
        limits.append(options["time_limit"])
        return exact.place(problem, **options)

    monkeypatch.setitem(methods._SPECS, "optimal", dataclasses.replace(exact, place=recorded))
    capacity = 0.2 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    result = methods.place("optimal", capped, time_limit=5.0)
    assert len(limits) > 1 and limits[0] <= 5.0
    assert all(later < earlier for earlier, later in zip(limits, limits[1:]))
    assert result.decide_s < 5.0 + 2.0       # the last try's own overrun
