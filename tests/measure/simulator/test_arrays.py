"""Building simulation problems: validation, cycles, real graphs and their variables."""

import numpy as np
import pytest

from tests.measure.simulator.cases import chain, make_problem
from tf_placeto.measure.simulator import (SimulationProblem, lower_bound_us, simulate,
                                          variable_bytes)


def test_bad_placements_and_cycles_are_rejected():
    problem = chain([1.0, 1.0], n_devices=2)
    with pytest.raises(ValueError):
        simulate(problem, np.array([0, 2]))
    with pytest.raises(ValueError):
        simulate(problem, np.array([0]))
    with pytest.raises(ValueError, match="cycle"):
        make_problem([1.0, 1.0], tensors=[(0, 1)], edges=[(0, 1)], control=[(1, 0)])


def test_real_graphs_build_valid_problems(mlp_model):
    import tensorflow as tf

    import tf_placeto as tp

    graph = tp.import_graph(mlp_model)
    costs = np.ones(len(graph))
    problem = SimulationProblem.from_op_graph(graph, costs, ["/device:GPU:0", "/device:GPU:1"],
                                              None, 20.0, 1000.0, op_overhead_us=1.0)
    handles = [op.index for op in graph.ops if op.type == "VarHandleOp"]
    assert handles and all(problem.persistent_bytes[k] > 0 for k in handles)
    assert problem.persistent_bytes.sum() == problem.persistent_bytes[handles].sum()
    assert len(problem.edge_tensor) == len(graph.data_edges)
    for placement in (np.zeros(len(graph), np.int64), np.arange(len(graph)) % 2):
        result = simulate(problem, placement, schedule=True)
        assert lower_bound_us(problem) <= result.step_time_us
        assert (result.schedule.kind == "op").sum() == len(graph)
    single = simulate(problem, np.zeros(len(graph), np.int64))
    assert single.step_time_us == pytest.approx(2.0 * len(graph))

    variable = tf.Variable(tf.ones([4, 8]))

    @tf.function
    def step(x):
        variable.assign_add(tf.ones([4, 8]))
        return tf.matmul(x, variable)

    captured = tp.import_graph(step, tf.TensorSpec([2, 4], tf.float32))
    sizes = variable_bytes(captured)
    assert sizes.sum() == 4 * 8 * 4
    assert captured.ops[int(sizes.argmax())].outputs[0].dtype == "resource"



def test_copy_shares_outside_half_are_refused():
    with pytest.raises(ValueError, match="copy shares"):
        chain([1.0, 1.0], n_devices=2, copy_share=0.6)
