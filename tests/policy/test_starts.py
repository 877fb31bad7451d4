"""What imitation is taught: the best decision known for a problem."""

from tests.helpers import build_problem, grouped_example
from tf_placeto.policy.objective import Objective
from tf_placeto.policy.starts import best_known, fast_start


def test_the_exact_placers_proven_decision_is_taught_where_it_simulates_faster():
    """small_cnn at 8 groups on 2 devices: the exact placer proves a decision that simulates
    faster than every fast placer's; on mlp one device is best, and the fast placers keep it."""
    problem = build_problem(grouped_example("small_cnn", 32), 2).coarsened(8)[0]
    fast_name, fast_devices, fast_values = fast_start(problem)
    name, devices = best_known(problem)
    assert name == fast_name and (devices == fast_devices).all()
    name, devices = best_known(problem, exact_seconds=10.0)
    assert name == "optimal"
    assert Objective(problem)(devices)[0] < min(fast_values)
    single = build_problem(grouped_example("mlp", 32), 2)
    assert best_known(single, exact_seconds=10.0)[0] == fast_start(single)[0] == "single"


def test_the_climbed_decision_is_taught_where_the_climb_made_it_faster():
    """small_cnn on 2 devices: climbing the fast placers' best in the simulator finds a faster
    decision, which imitation is then taught, in canonical device names."""
    problem = build_problem(grouped_example("small_cnn", 32), 2)
    _, _, fast_values = fast_start(problem)
    name, devices = best_known(problem, climb_seconds=10.0)
    assert name == "hill_climb"
    assert Objective(problem)(devices)[0] < min(fast_values)
    assert (problem.canonical(devices) == devices).all()
