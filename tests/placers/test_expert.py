"""expert: whole layers on their own devices, from the rules the workload knows."""

import numpy as np

from tests.helpers import build_problem
from tf_placeto import methods


def test_expert_puts_each_layer_on_its_device(mlp_groups):
    problem = build_problem(mlp_groups, 2)
    result = methods.place("expert", problem, layers=[("dense_1", 1), ("dense", 0)])
    group_of = {name: g for g in range(problem.n_groups) for name in mlp_groups.op_names(g)}
    device_of = {name: result.group_devices[g] for name, g in group_of.items()}
    first, second = ([device_of[n] for n in device_of if f"mlp/{layer}/MatMul" in n]
                     for layer in ("dense", "dense_1"))
    assert set(first) == {0} and set(second) == {1}
    without_rules = methods.place("expert", problem).group_devices
    assert np.array_equal(without_rules, methods.place("single", problem).group_devices)


def test_the_expert_gets_its_layers_from_the_workload():
    expert = methods.spec("expert")
    assert methods.keywords(expert, None, {"layers": ()}) == {"layers": ()}
    assert methods.keywords(expert, {"budget": 3}, {"layers": (("dense", 0),)}) == {
        "layers": (("dense", 0),)}
