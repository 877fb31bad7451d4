"""The algorithmic placers on real example graphs, judged by the op-level simulator."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from tf_placeto import placers
from tf_placeto.placers.problem import PlacementProblem

ALL = ["single", "expert", "round_robin", "random", "metis", "m_topo", "m_etf", "m_sct", "heft"]
SPLITTING = [name for name in ALL if name not in ("single", "expert")]
LIST_SCHEDULERS = ["m_etf", "m_sct", "heft"]


def estimated_cost_model(graph, remote_extra_us=0.0):
    """A profile without running anything: static work estimates, Placeto's link speed;
    `remote_extra_us` per op (or for all): what it takes more with a remote input."""
    from tf_placeto.measure.costmodel import CostModel
    from tf_placeto.graph.work import estimate_work

    ops = pd.DataFrame({"op": [op.name for op in graph.ops], "device_type": "CPU",
                        "compute_us": estimate_work(graph) / 1e3,
                        "output_bytes": [op.output_bytes for op in graph.ops], "traced": True,
                        "remote_extra_us": remote_extra_us})
    pair = ["/device:CPU:0", "/device:CPU:1"]
    links = pd.DataFrame([{"src": a, "dst": b, "latency_us": 25.0, "bytes_per_us": 7600.0}
                          for a in pair for b in pair if a != b])
    return CostModel(ops=ops, links=links, meta={"devices": pair})


def build_problem(groups, n_devices, capacity_bytes=None, remote_extra_us=0.0):
    import tf_placeto as tp

    names, model = estimated_cost_model(groups.op_graph, remote_extra_us).with_more_devices(
        n_devices)
    return PlacementProblem.build(groups, model, tp.DeviceSet.from_strings(names),
                                  capacity_bytes=capacity_bytes)


def grouped_example(name, max_groups):
    import tf_placeto as tp
    from tf_placeto.examples import registry

    return tp.group(tp.import_graph(registry.saved_model_path(name)), max_groups=max_groups)


@pytest.fixture(scope="module")
def small_cnn_groups():
    return grouped_example("small_cnn", 32)


@pytest.fixture(scope="module")
def mlp_groups():
    return grouped_example("mlp", 32)


@pytest.fixture(scope="module")
def two_devices(small_cnn_groups):
    return build_problem(small_cnn_groups, 2)


@pytest.fixture(scope="module")
def four_devices(small_cnn_groups):
    return build_problem(small_cnn_groups, 4)


def step_us(problem, decision):
    return problem.simulate(decision).step_time_us


def test_every_placer_is_registered_in_report_order():
    assert placers.names() == ALL + ["optimal", "rnn", "placeto"]   # each has its test file


@pytest.mark.parametrize("method", ALL)
def test_decision_is_valid_and_repeatable(method, four_devices):
    first = placers.place(method, four_devices)
    again = placers.place(method, four_devices)
    assert first.group_devices.shape == (four_devices.n_groups,)
    assert np.array_equal(first.group_devices, again.group_devices)
    assert first.decide_s < 2.0


def test_random_draws_differ_between_seeds(four_devices):
    draws = {tuple(placers.place("random", four_devices, seed=s).group_devices) for s in range(3)}
    assert len(draws) == 3


@pytest.mark.parametrize("method", ALL)
def test_kernel_rules_are_obeyed(method, two_devices):
    """Every other group has no kernel on device 0, one group has one only on device 0."""
    compute = two_devices.compute_us.copy()
    compute[::2, 0] = np.inf
    compute[1, 1] = np.inf
    restricted = dataclasses.replace(two_devices, compute_us=compute)
    decision = placers.place(method, restricted).group_devices
    assert np.all(decision[::2] == 1) and decision[1] == 0


@pytest.mark.parametrize("method", SPLITTING)
def test_a_memory_cap_that_forces_a_split_is_met(method, small_cnn_groups, two_devices):
    capacity = 0.6 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    loads = capped.device_loads(placers.place(method, capped).group_devices)
    assert np.all(loads <= capacity)


def test_single_says_when_no_device_holds_the_graph(small_cnn_groups, two_devices):
    capacity = 0.6 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    result = placers.place("single", capped)
    assert len(set(result.group_devices)) == 1 and not result.info["fits"]


@pytest.mark.parametrize("method", ALL)
def test_hopeless_memory_still_gets_a_decision(method, small_cnn_groups, two_devices):
    capacity = 0.2 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    assert placers.place(method, capped).group_devices.shape == (capped.n_groups,)


def test_memory_repair_moves_groups_until_the_simulated_peak_fits(two_devices):
    """Where the modelled memory misjudged a decision, single moves chosen in the simulator
    make it fit; where nothing can fit, there is no repaired decision."""
    from tf_placeto.placers.common import memory_repair

    everything_on_one = np.zeros(two_devices.n_groups, np.int64)
    peak = two_devices.single_device_peak_bytes
    capped = two_devices.with_capacity([0.9 * peak] * 2)
    assert not capped.simulate(everything_on_one).feasible
    decision, moved = memory_repair(capped, everything_on_one)
    assert moved > 0 and capped.simulate(decision).feasible
    assert memory_repair(two_devices.with_capacity([0.3 * peak] * 2), everything_on_one) is None


def test_single_picks_the_fastest_device_that_holds_the_graph(small_cnn_groups, two_devices):
    from tf_placeto.placers.single import all_on

    footprint = two_devices.memory_bytes.sum()
    lopsided = build_problem(small_cnn_groups, 2, capacity_bytes=[0.5 * footprint, footprint])
    assert np.all(placers.place("single", lopsided).group_devices == 1)
    best = step_us(two_devices, placers.place("single", two_devices).group_devices)
    assert all(best <= step_us(two_devices, all_on(two_devices, d)) for d in range(2))


@pytest.mark.parametrize("method", ALL)
def test_no_step_time_beats_the_lower_bound(method, two_devices, four_devices):
    for problem in (two_devices, four_devices):
        decision = placers.place(method, problem).group_devices
        assert step_us(problem, decision) >= problem.lower_bound_us() * (1 - 1e-9)


@pytest.mark.parametrize("method", LIST_SCHEDULERS)
def test_list_schedulers_use_the_branches_of_a_wide_graph(method, two_devices, four_devices):
    """small_cnn's two branches can run side by side: dealing out slices of the step cannot
    do better than scheduling them, and a schedule comes within 20% of the bound."""
    for problem in (two_devices, four_devices):
        scheduled = step_us(problem, placers.place(method, problem).group_devices)
        dealt = step_us(problem, placers.place("round_robin", problem).group_devices)
        assert scheduled <= dealt
        assert scheduled <= 1.2 * problem.lower_bound_us()


def test_expert_puts_each_layer_on_its_device(mlp_groups):
    problem = build_problem(mlp_groups, 2)
    result = placers.place("expert", problem, layers=[("dense_1", 1), ("dense", 0)])
    group_of = {name: g for g in range(problem.n_groups) for name in mlp_groups.op_names(g)}
    device_of = {name: result.group_devices[g] for name, g in group_of.items()}
    first, second = ([device_of[n] for n in device_of if f"mlp/{layer}/MatMul" in n]
                     for layer in ("dense", "dense_1"))
    assert set(first) == {0} and set(second) == {1}
    without_rules = placers.place("expert", problem).group_devices
    assert np.array_equal(without_rules, placers.place("single", problem).group_devices)


def test_favourite_children_are_one_to_one(four_devices):
    from tf_placeto.placers.m_sct import favourite_child_lp, favourite_children

    edge_x, makespan = favourite_child_lp(four_devices)
    favourite = favourite_children(four_devices, edge_x)
    chosen = favourite[favourite >= 0]
    assert len(chosen) == len(set(chosen)) > 0
    assert np.all((edge_x >= -1e-9) & (edge_x <= 1 + 1e-9))
    assert makespan >= four_devices.compute_us.max(axis=1).max() * (1 - 1e-9)


def test_metis_reports_the_bytes_it_cuts(four_devices):
    info = placers.place("metis", four_devices).info
    assert 0 < info["edge_cut_bytes"] <= four_devices.edge_bytes.sum() + \
        four_devices.feedback_bytes.sum()


def test_every_placer_decides_inception_v3_in_seconds():
    """256 groups on 8 devices, under a memory cap, the size the RNN planner worked at."""
    groups = grouped_example("inception_v3", 256)
    free = build_problem(groups, 8)
    capped = build_problem(groups, 8, capacity_bytes=[0.15 * free.memory_bytes.sum()] * 8)
    for method in ALL:
        result = placers.place(method, capped)
        assert result.decide_s < 3.0, method
        if method in SPLITTING:
            assert np.all(capped.device_loads(result.group_devices) <= capped.capacity_bytes)


def test_searching_placers_are_not_rerun_on_smaller_memory_budgets(small_cnn_groups,
                                                                   two_devices):
    """The RNN planner judges memory in the simulator: one search of its budget, even where
    its answer does not fit (a hopeless capacity)."""
    capacity = 0.2 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    result = placers.place("rnn", capped, budget=16)
    assert result.info["memory_margin"] == 1.0 and result.info["evaluations"] == 16


def test_a_time_limit_bounds_every_try_together(small_cnn_groups, two_devices, monkeypatch):
    """Under a memory limit the exact placer may plan again on smaller budgets; each try gets
    what is left of its time limit, not the whole of it."""
    from tf_placeto.placers import optimal

    limits = []
    original = optimal.place

    def recorded(problem, **options):
        limits.append(options["time_limit"])
        return original(problem, **options)

    monkeypatch.setattr(optimal, "place", recorded)
    capacity = 0.2 * two_devices.memory_bytes.sum()
    capped = build_problem(small_cnn_groups, 2, capacity_bytes=[capacity] * 2)
    result = placers.place("optimal", capped, time_limit=5.0)
    assert len(limits) > 1 and limits[0] <= 5.0
    assert all(later < earlier for earlier, later in zip(limits, limits[1:]))
    assert result.decide_s < 5.0 + 2.0       # the last try's own overrun


def test_every_edge_cost_counts_what_remote_inputs_take_more(small_cnn_groups, two_devices):
    """The list schedulers' transfers, HEFT's and m-SCT's mean ones, and both objectives of
    the exact placer charge a crossing edge its consumer's remote extra, and only then."""
    from tf_placeto.placers.common import edge_timing
    from tf_placeto.placers.objectives import device_loads_us, latency_objective_us

    slow = build_problem(small_cnn_groups, 2, remote_extra_us=1e6)
    extra = slow.edge_extra_us
    assert np.all(extra[two_devices.edge_bytes > 0] >= 1e6)
    timing = edge_timing(slow)
    for e in range(len(extra)):
        assert timing.transfer_us(slow, e, 0) - timing.transfer_us(two_devices, e, 0) == \
            pytest.approx([0.0, extra[e]])
    assert timing.mean_transfer_us(slow) - timing.mean_transfer_us(two_devices) == \
        pytest.approx(extra)
    together = np.zeros(slow.n_groups, np.int64)
    assert latency_objective_us(slow, together) == latency_objective_us(two_devices, together)
    apart = together.copy()
    apart[slow.edge_dst[np.argmax(extra)]] = 1
    assert latency_objective_us(slow, apart) >= latency_objective_us(two_devices, apart) + 1e6
    assert device_loads_us(slow, apart).sum() >= device_loads_us(two_devices, apart).sum() + 1e6


def test_the_exact_placer_does_not_cut_where_remote_inputs_are_slow(small_cnn_groups,
                                                                    two_devices):
    """Where every op took a second more with a remote input, no cut pays: the exact placer,
    which splits small_cnn otherwise, keeps it on one device."""
    slow = build_problem(small_cnn_groups, 2, remote_extra_us=1e6)
    assert len(set(placers.place("optimal", two_devices).group_devices)) == 2
    assert step_us(slow, placers.place("optimal", slow).group_devices) < 1e6
