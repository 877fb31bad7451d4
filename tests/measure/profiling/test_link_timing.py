"""Timing links: chains of transfers fitted as latency + bytes / bandwidth, between logical
CPUs and between worker processes."""

import tf_placeto as tp
from tf_placeto.measure.profiling.link_timing import calibrate_links
from tf_placeto.measure.runtimes.runtime import Runtime


def test_links_between_logical_cpus_are_fitted():
    links = calibrate_links(Runtime.local(tp.DeviceSet.local(2)), runs=1)
    assert list(links[["src", "dst"]].itertuples(index=False, name=None)) == [
        ("/device:CPU:0", "/device:CPU:1"), ("/device:CPU:1", "/device:CPU:0")]
    assert (links["latency_us"] >= 0).all() and (links["bytes_per_us"] > 0).all()


def test_links_between_worker_processes_cost_time():
    """A tensor between two processes crosses gRPC: latency and finite bandwidth, not free."""
    from tf_placeto.measure.runtimes.local import LocalCluster

    with LocalCluster(2) as cluster:      # the fastest of 4 runs: robust to a busy machine
        links = calibrate_links(Runtime.on_cluster(cluster), runs=4)
    # Tens to hundreds of microseconds here, 18 on CI's fastest machine; a fit of 0 (as
    # logical CPUs in one process often give) would mean the link was free.
    assert (links["latency_us"] > 5).all()
    assert (links["bytes_per_us"] < 1e5).all()
