"""Benchmark: do two local worker processes really run in parallel? (a script, not a test)

    python -m measure.bench_cluster [--rounds 5] [--chain 8] [--size 1024]

Starts `--cluster local:2` (two one-core workers) and times a graph of two independent chains
of matmuls placed both on worker 0, then one chain per worker. Prints the fastest of
`--rounds` warm runs of each (the placements run in turns, so load on this shared machine hits
both alike) and their ratio: near 0.5 when the workers run side by side, near 1 when they do
not. The test suite checks the same parallelism without a clock threshold, from the overlap of
the two workers' traced kernels (tests/measure/runtimes/test_cluster.py).
"""

from __future__ import annotations

import argparse
import time

from tf_placeto.examples.probes import chains_graph


def best_step_times(cluster, placements, rounds: int = 5, **graph_options) -> list:
    """The fastest of `rounds` warm runs of chains_graph for each placement, run in turns."""
    import tensorflow as tf

    sessions, times = [], []
    try:
        for devices in placements:
            graph, total = chains_graph(devices, **graph_options)
            sessions.append((tf.compat.v1.Session(cluster.target, graph=graph,
                                                  config=cluster.session_config()), total))
            sessions[-1][0].run(total)   # warm up: partitioning, kernels, first allocations
            times.append([])
        for _ in range(rounds):
            for (session, total), runs in zip(sessions, times):
                start = time.perf_counter()
                session.run(total)
                runs.append(time.perf_counter() - start)
    finally:
        for session, _ in sessions:
            session.close()
    return [min(runs) for runs in times]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chain", type=int, default=8, help="matmuls per chain")
    parser.add_argument("--size", type=int, default=1024, help="matrix side")
    args = parser.parse_args(argv)

    from tf_placeto import _quiet

    _quiet.set_tensorflow_environment()
    from tf_placeto.measure.runtimes.local import LocalCluster

    with LocalCluster(2) as cluster:
        task0, task1 = cluster.device_names
        one, split = best_step_times(cluster, [[task0, task0], [task0, task1]], args.rounds,
                                     chain_length=args.chain, size=args.size)
    print(f"two chains on worker 0: {one * 1e3:.0f} ms; one chain per worker: "
          f"{split * 1e3:.0f} ms; ratio {split / one:.2f} (0.5: fully parallel)")


if __name__ == "__main__":
    main()
