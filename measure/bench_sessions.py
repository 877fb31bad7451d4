"""Benchmark: one split placement in many new sessions, on cold or warm clusters, by worker threads.

A script, not a test.

    python -m measure.bench_sessions [--model branches] [--placer heft] [--sessions 8]
                                     [--threads 1 8] [--links warm] [--clusters 1]
                                     [--steps 10]

The model (measure/real_models.py) is profiled on local:2 (cached) and split by the placer.
For each thread count T and each state of the links L, `--clusters` new clusters
`local:2,threads=T` run, in turn, `--sessions` new sessions of the graph as written and of the
split, each timed for `--steps` steps after one warm-up step; the settings take turns cluster
by cluster. A "warm" cluster first exchanges bulk tensors between its tasks
(tf_placeto.measure.links, as open_runtime does); a "cold" one starts timing at once.
Printed: each session's median ms per step, split and as written, the split's ratio; then per
setting how many split sessions ran no faster than 0.9x as written ("slow") and the ratios
of each cluster's first session.

Two causes of slow sessions were found with it (BUILD.md). With one inter-op thread, a worker
serves its peer's RecvTensor calls only after the ops it has queued, and whether the request
comes before or after them is settled per session (8 threads, the default since, answer at
once). On a cold cluster, the first few dozen steps that move bulk data between tasks are
slow (warming the links, the default since, removes that).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="branches")
    parser.add_argument("--placer", default="heft")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--links", nargs="+", default=["warm"], choices=["cold", "warm"])
    parser.add_argument("--clusters", type=int, default=1, help="new clusters per setting")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)

    import pandas as pd

    from measure import real_models, say
    from tf_placeto import methods
    from tf_placeto.measure.cluster import parse_cluster
    from tf_placeto.measure.runner import ModelRunner
    from tf_placeto.measure.runtime import Runtime, open_runtime
    from tf_placeto.workload import load_workload

    with open_runtime(cluster="local:2") as runtime:
        workload = load_workload(real_models.build(args.model), runtime)
    problem = workload.problem()
    split = problem.placement(methods.place(args.placer, problem).group_devices)
    runner = ModelRunner(workload.graph)
    rows = []
    settings = list(itertools.product(args.threads, args.links))
    for cluster_index, (threads, links) in itertools.product(range(args.clusters), settings):
        with parse_cluster(f"local:2,threads={threads}") as cluster:
            runtime = Runtime.on_cluster(cluster)
            if links == "warm":
                runtime.warm_links()
            for session in range(args.sessions):
                say(f"{threads} inter-op threads, {links} links, cluster {cluster_index + 1}: "
                    f"session {session + 1} of {args.sessions}")
                medians = {}
                for label, placement in (("as written", None), ("split", split)):
                    with runner.session(runtime, placement, 600) as steps:
                        steps.step()
                        medians[label] = statistics.median(
                            steps.step() for _ in range(args.steps)) * 1e3
                rows.append({"threads": threads, "links": links, "cluster": cluster_index + 1,
                             "session": session + 1,
                             "as written ms": medians["as written"],
                             "split ms": medians["split"],
                             "split / as written": medians["split"] / medians["as written"]})
    table = pd.DataFrame(rows)
    print(f"{args.model}: {args.placer}'s split against the graph as written, new sessions on local:2")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for (threads, links), runs in table.groupby(["threads", "links"]):
        ratio = runs["split / as written"]
        firsts = runs[runs.session == 1]["split / as written"]
        print(f"{threads} inter-op threads, {links} links: {int((ratio > 0.9).sum())} of "
              f"{len(runs)} split sessions slow (> 0.9x), median {ratio.median():.2f}x; "
              f"split {runs['split ms'].min():.1f}-{runs['split ms'].max():.1f} ms, as written "
              f"{runs['as written ms'].min():.1f}-{runs['as written ms'].max():.1f} ms; "
              f"first sessions " + " ".join(f"{r:.2f}" for r in firsts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
