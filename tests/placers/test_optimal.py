"""The exact placer against exhaustive enumeration, the other placers and its time limit."""

import dataclasses
import itertools
import json

import numpy as np
import pytest

from tests.helpers import build_problem, grouped_example, step_us
from tf_placeto import methods
from tf_placeto.errors import PlacetoError
from tf_placeto.placers import optimal
from tf_placeto.placers.common import edge_timing
from tf_placeto.placers.objectives import latency_objective_us, throughput_objective_us
from tf_placeto.placers.optimal import fits_memory
from tf_placeto.placers.problem import PlacementProblem

OTHERS = [name for name in methods.names() if name not in ("optimal", "placeto")]


def scorer(problem, objective):
    """The objective as a function of a decision, its edge timing computed once."""
    if objective == "throughput":
        return lambda decision: throughput_objective_us(problem, decision)
    timing = edge_timing(problem)
    return lambda decision: latency_objective_us(problem, decision, timing)


def exhaustive_best(problem, score) -> float:
    """The least score over every decision within the memory model (kernels: inf scores)."""
    decisions = (np.array(d) for d in itertools.product(range(problem.n_devices),
                                                        repeat=problem.n_groups))
    return min(score(d) for d in decisions if fits_memory(problem, d))


def variant(problem, kind):
    """alike: as profiled; capped: no device holds the whole graph; slower: device 0 slower and
    group 1 only there (device classes); unlike: that, and a slower link 0 -> 1; remote: some
    edges' consumers slower when the edge crosses devices; copies: each end's processor
    copies what crosses, edges of 0 to 2 tensors, the remote extra partly paid per input
    that travels, partly once per op; floating: each device a task of
    its own, and work that floats between the processors of a stream (per step and per
    message between tasks); tasks: each device a task of its own, with a RunGraph call per
    remote task and a message per tensor between tasks."""
    if kind == "alike":
        return problem
    if kind == "tasks":
        mean_compute = float(problem.compute_us.mean())
        return PlacementProblem.from_simulation(problem.groups, dataclasses.replace(
            problem.simulation, device_task=np.arange(problem.n_devices),
            remote_task_us=mean_compute, task_message_us=mean_compute / 4))
    if kind == "floating":
        mean_compute = float(problem.compute_us.mean())
        return dataclasses.replace(problem, simulation=dataclasses.replace(
            problem.simulation, device_task=np.arange(problem.n_devices),
            floating_us=4 * mean_compute, floating_message_us=mean_compute))
    if kind == "remote":
        rng = np.random.default_rng(0)
        mean_compute = float(problem.compute_us.mean())
        return dataclasses.replace(
            problem,
            edge_extra_us=rng.choice([0.0, mean_compute], size=len(problem.edge_src)),
            feedback_extra_us=rng.choice([0.0, mean_compute], size=len(problem.feedback_src)))
    if kind == "copies":
        rng = np.random.default_rng(1)
        mean_compute = float(problem.compute_us.mean())
        apart = 1.0 - np.eye(problem.n_devices)
        fixed = mean_compute / 8 * apart
        extra = rng.choice([0.0, mean_compute], size=len(problem.edge_src))
        return dataclasses.replace(
            problem, latency_us=problem.latency_us + 2 * fixed,
            simulation=dataclasses.replace(problem.simulation, link_copy_us=fixed,
                                           link_copy_share=0.2 * apart),
            edge_tensors=rng.integers(0, 3, len(problem.edge_src)).astype(np.float64),
            edge_extra_us=extra, edge_input_us=extra * rng.choice([0.0, 0.5, 1.0], len(extra)))
    if kind == "capped":
        return problem.with_capacity([0.7 * problem.memory_bytes.sum()] * problem.n_devices)
    compute = problem.compute_us.copy()
    compute[:, 0] *= 1.5
    compute[1, 1:] = np.inf
    if kind == "slower":
        return dataclasses.replace(problem, compute_us=compute)
    latency, bandwidth = problem.latency_us.copy(), problem.bytes_per_us.copy()
    latency[0, 1] *= 4
    bandwidth[0, 1] /= 4
    return dataclasses.replace(problem, compute_us=compute, latency_us=latency,
                               bytes_per_us=bandwidth)


@pytest.mark.parametrize("n_devices,n_groups", [(2, 10), (3, 8)])
@pytest.mark.parametrize("kind", ["alike", "capped", "slower", "unlike", "remote", "copies",
                                  "floating", "tasks"])
@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_the_optimum_is_the_best_of_every_decision(small_cnn_groups, n_devices, n_groups,
                                                   kind, objective):
    problem = variant(build_problem(small_cnn_groups, n_devices).coarsened(n_groups)[0], kind)
    score = scorer(problem, objective)
    best = exhaustive_best(problem, score)
    assert np.isfinite(best)
    if kind == "capped":
        assert not any(fits_memory(problem, np.full(problem.n_groups, d))
                       for d in range(n_devices))
    decision, info = optimal.place(problem, objective=objective)
    assert info["objective_us"] == score(decision) == pytest.approx(best, rel=1e-6)
    assert info["proven_optimal"] and info["bound_us"] <= best * (1 + 1e-5)
    assert fits_memory(problem, decision)
    problem.check(decision)                     # kernel rules


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_no_other_placer_scores_better(small_cnn_groups, objective):
    """On the whole small_cnn graph (27 groups, 2 devices), proven; the optimal latency
    decision is also about as fast as the best list scheduler's in the simulator."""
    problem = build_problem(small_cnn_groups, 2)
    score = scorer(problem, objective)
    result = methods.place("optimal", problem, objective=objective)
    assert result.info["proven_optimal"]
    others = {name: methods.place(name, problem).group_devices for name in OTHERS}
    assert all(result.info["objective_us"] <= score(d) for d in others.values())
    if objective == "latency":
        fastest = min(problem.simulate(others[name]).step_time_us
                      for name in ("m_etf", "m_sct", "heft"))
        assert problem.simulate(result.group_devices).step_time_us <= 1.05 * fastest


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_a_time_limit_gives_the_best_found_and_its_gap(objective):
    """Inception-V3 in 128 groups on 4 devices: far more decisions than seconds allow."""
    problem = build_problem(grouped_example("inception_v3", 128), 4)
    result = methods.place("optimal", problem, objective=objective, time_limit=2.0)
    info = result.info
    assert result.decide_s < 2.0 + 2.0
    assert info["interface"] == "highspy"
    assert 0 <= info["gap"] < 1 and info["proven_optimal"] == (info["gap"] <= 1e-5)
    assert info["bound_us"] <= info["objective_us"]
    assert info["objective_us"] <= min(scorer(problem, objective)(
        methods.place(name, problem).group_devices) for name in ("single", "m_topo", "m_etf"))
    assert json.loads(json.dumps(info, allow_nan=False)) == info


@pytest.mark.parametrize("objective", ["latency", "throughput"])
def test_highspy_and_scipy_prove_the_same_optimum(small_cnn_groups, objective):
    problem = variant(build_problem(small_cnn_groups, 3).coarsened(8)[0], "unlike")
    found = {interface: optimal.place(problem, objective=objective, interface=interface)[1]
             for interface in ("highspy", "scipy")}
    assert {info["interface"] for info in found.values()} == {"highspy", "scipy"}
    assert all(info["proven_optimal"] for info in found.values())
    assert found["highspy"]["objective_us"] == pytest.approx(found["scipy"]["objective_us"],
                                                             rel=1e-6)


def test_when_nothing_fits_it_says_so(small_cnn_groups):
    problem = build_problem(small_cnn_groups, 2).coarsened(10)[0]
    tight = problem.with_capacity([0.3 * problem.memory_bytes.sum()] * 2)
    for objective in ("latency", "throughput"):
        info = optimal.place(tight, objective=objective)[1]
        assert info["bound_us"] is info["gap"] is None and not info["proven_optimal"]
        json.dumps(info, allow_nan=False)


def test_options_are_checked(small_cnn_groups):
    problem = build_problem(small_cnn_groups, 2)
    with pytest.raises(PlacetoError, match="objective"):
        methods.place("optimal", problem, objective="energy")
    with pytest.raises(PlacetoError, match="interface 'gurobi'"):
        methods.place("optimal", problem, interface="gurobi")


def test_the_exact_placer_does_not_cut_where_remote_inputs_are_slow(small_cnn_groups,
                                                                    two_devices):
    """Where every op took a second more with a remote input, no cut pays: the exact placer,
    which splits small_cnn otherwise, keeps it on one device."""
    slow = build_problem(small_cnn_groups, 2, remote_extra_us=1e6)
    assert len(set(methods.place("optimal", two_devices).group_devices)) == 2
    assert step_us(slow, methods.place("optimal", slow).group_devices) < 1e6


def test_the_exact_placer_keeps_one_task_where_each_remote_one_costs_more_than_it_saves(
        small_cnn_groups, two_devices):
    """On two tasks whose RunGraph call per step costs as much as the whole step on one
    device, no split pays in the simulator, and the exact placer, which splits small_cnn
    where the devices share a process, keeps it on the session's task."""
    single_us = step_us(two_devices, np.zeros(two_devices.n_groups, np.int64))
    tasks = PlacementProblem.from_simulation(small_cnn_groups, dataclasses.replace(
        two_devices.simulation, device_task=np.array([0, 1]), remote_task_us=single_us))
    decision = methods.place("optimal", tasks).group_devices
    assert len(set(methods.place("optimal", two_devices).group_devices)) == 2
    assert not decision.any()
