"""random: seeded, so a run can be repeated, and different for another seed."""

from tf_placeto import methods


def test_random_draws_differ_between_seeds(four_devices):
    draws = {tuple(methods.place("random", four_devices, seed=s).group_devices) for s in range(3)}
    assert len(draws) == 3
