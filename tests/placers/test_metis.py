"""metis: a balanced min-cut partition, and the bytes it cuts."""

from tf_placeto import methods


def test_metis_reports_the_bytes_it_cuts(four_devices):
    info = methods.place("metis", four_devices).info
    assert 0 < info["edge_cut_bytes"] <= four_devices.edge_bytes.sum() + \
        four_devices.feedback_bytes.sum()
