"""A cost graph as the project's PlacementProblem (placers/contiguous/as_problem.py): its
costs, memory and colour classes as the placers and the simulator see them. Every instance
is written here."""

import numpy as np
import pytest

from tf_placeto.errors import InputError
from tf_placeto.graph.cost_graph import parse_cost_graph
from tf_placeto.placers.contiguous.accounting import infeasibility
from tf_placeto.placers.contiguous.as_problem import group_of, placement_problem


def _graph(nodes, edges, memory=10.0, accelerators=2, cpus=1):
    """nodes: (name, cpu time, accelerator time, size, supported, colour class, backward);
    edges: (source, destination, cost of the source's output)."""
    return parse_cost_graph({
        "maxSizePerFPGA": memory, "maxFPGAs": accelerators, "maxCPUs": cpus,
        "nodes": [{"id": i, "name": name, "cpuLatency": cpu, "fpgaLatency": accel,
                   "size": size, "supportedOnFpga": ok, "colorClass": cc,
                   "isBackwardNode": back}
                  for i, (name, cpu, accel, size, ok, cc, back) in enumerate(nodes)],
        "edges": [{"sourceId": u, "destId": v, "cost": cost} for u, v, cost in edges]})


def _chain(cost_a=0.75, cost_b=0.1, memory=10.0):
    """a -> b -> c, each in its own class; c runs only on a CPU."""
    return _graph([("a", 5, 2, 4, 1, 0, 0), ("b", 7, 3, 5, 1, 1, 0), ("c", 1, 0, 1, 0, 2, 0)],
                  [(0, 1, cost_a), (1, 2, cost_b)], memory)


def test_one_op_per_node_with_its_time_on_each_device_type():
    problem = placement_problem(_chain(), "latency", 1)
    assert problem.device_names == ["/device:GPU:0", "/device:GPU:1", "/device:CPU:0"]
    assert problem.simulation.op_names == ["a", "b", "c"]
    assert problem.compute_us[:2].tolist() == [[2, 2, 5], [3, 3, 7]]
    # c has no accelerator: only the CPU may take its group
    assert problem.compute_us[2].tolist() == [np.inf, np.inf, 1]
    assert problem.allowed[2].tolist() == [False, False, True]


def test_a_transfer_takes_the_nodes_output_cost_across_devices():
    problem = placement_problem(_chain(), "latency", 1)
    same = problem.simulate(np.array([0, 0, 2]))
    assert same.step_time_us == pytest.approx(2 + 3 + 0.1 + 1)
    across = problem.simulate(np.array([0, 1, 2]))
    assert across.step_time_us == pytest.approx(2 + 0.75 + 3 + 0.1 + 1, abs=1e-5)
    onto_cpu = problem.simulate(np.array([0, 2, 2]))
    assert onto_cpu.step_time_us == pytest.approx(2 + 0.75 + 7 + 1, abs=1e-5)


def test_memory_is_what_the_nodes_hold_against_each_accelerator():
    """a (4) and b (5) fit one accelerator of 9 exactly, not of 8.5; the CPU holds anything;
    the simulator agrees with their accounting despite the tensors it also counts."""
    for memory, fits in ((9.0, True), (8.5, False)):
        graph = _chain(memory=memory)
        problem = placement_problem(graph, "throughput", 3)
        split = np.array([0, 0, 2])
        assert (infeasibility(graph, split) is None) is fits
        assert problem.evaluate(split).feasible is fits
        assert problem.simulate(split).feasible is fits
    assert np.isinf(problem.capacity_bytes[2])
    assert problem.memory_bytes[1] / problem.memory_bytes[0] == pytest.approx(5 / 4, rel=1e-4)


def test_a_colour_class_is_one_group_and_a_late_member_makes_feedback_edges():
    """Training: forward f1 -> f2, backward b2 -> b1, b2 in f2's class and b1 in f1's."""
    graph = _graph([("f1", 4, 1, 1, 1, 10, 0), ("f2", 4, 1, 1, 1, 20, 0),
                    ("b2", 8, 2, 1, 1, 20, 1), ("b1", 8, 2, 1, 1, 10, 1)],
                   [(0, 1, 0.5), (1, 2, 0.25), (2, 3, 0.125), (0, 3, 0.5)])
    groups = group_of(graph)
    assert groups.tolist() == [0, 1, 1, 0]
    problem = placement_problem(graph, "latency", 1)
    assert problem.n_groups == 2
    assert list(zip(problem.edge_src, problem.edge_dst)) == [(0, 1)]
    assert list(zip(problem.feedback_src, problem.feedback_dst)) == [(1, 0)]
    # group 0 (f1 and b1) on the CPU: 4 + 8 there, the accelerator's times elsewhere
    assert problem.compute_us[0].tolist() == [3, 3, 12]
    assert problem.op_devices(np.array([2, 0])).tolist() == [2, 0, 0, 2]


def test_under_throughput_a_stream_holds_the_steps_in_flight():
    problem = placement_problem(_chain(), "throughput", 3)
    assert (problem.objective, problem.in_flight) == ("throughput", 3)
    pipelined = problem.evaluate(np.array([0, 1, 2])).us_per_step
    one_device = problem.evaluate(np.array([0, 0, 2])).us_per_step
    assert pipelined < one_device


def test_a_node_only_a_cpu_runs_needs_a_cpu():
    graph = _graph([("a", 1, 1, 0, 0, 0, 0)], [], cpus=0)
    with pytest.raises(InputError, match="runs only on a CPU, and the graph has none"):
        placement_problem(graph, "latency", 1)
