"""m-SCT: its favourite children, from a linear program."""

import numpy as np

from tf_placeto.placers.m_sct import favourite_child_lp, favourite_children


def test_favourite_children_are_one_to_one(four_devices):
    edge_x, makespan = favourite_child_lp(four_devices)
    favourite = favourite_children(four_devices, edge_x)
    chosen = favourite[favourite >= 0]
    assert len(chosen) == len(set(chosen)) > 0
    assert np.all((edge_x >= -1e-9) & (edge_x <= 1 + 1e-9))
    assert makespan >= four_devices.compute_us.max(axis=1).max() * (1 - 1e-9)
