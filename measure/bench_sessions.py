"""Benchmark: one split placement in many new sessions, by inter-op threads per worker (a
script, not a test).

    python -m measure.bench_sessions [--model branches] [--placer heft] [--sessions 8]
                                     [--threads 1 8] [--steps 10]

The model (measure/real_models.py) is profiled on local:2 (cached) and split by the placer. For
each thread count T, one cluster `local:2,threads=T` runs, in turn, `--sessions` new
sessions of the graph as written and of the split, each timed for `--steps` steps after one
warm-up step. Printed per T: each session's median ms per step, split and as written, the
split's ratio, and how many split sessions ran no faster than 0.9x as written ("slow").
With one inter-op thread, a worker serves its peer's RecvTensor calls only after the ops it
has queued, and whether the request comes before or after them is settled per session: the
split runs in one of two modes (BUILD.md, "the cause of the two modes"). With 8 (the
default since), a free thread answers at once.
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="branches")
    parser.add_argument("--placer", default="heft")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)

    import pandas as pd

    from measure import real_models, say
    from tf_placeto import methods
    from tf_placeto.measure.runner import ModelRunner
    from tf_placeto.measure.runtime import open_runtime
    from tf_placeto.workload import load_workload

    with open_runtime(cluster="local:2") as runtime:
        workload = load_workload(real_models.build(args.model), runtime)
    problem = workload.problem()
    split = problem.placement(methods.place(args.placer, problem).group_devices)
    runner = ModelRunner(workload.graph)
    rows = []
    for threads in args.threads:
        with open_runtime(cluster=f"local:2,threads={threads}") as runtime:
            for session in range(args.sessions):
                say(f"{threads} inter-op threads: session {session + 1} of {args.sessions}")
                medians = {}
                for label, placement in (("as written", None), ("split", split)):
                    with runner.session(runtime, placement, 600) as steps:
                        steps.step()
                        medians[label] = statistics.median(
                            steps.step() for _ in range(args.steps)) * 1e3
                rows.append({"threads": threads, "session": session + 1,
                             "as written ms": medians["as written"],
                             "split ms": medians["split"],
                             "split / as written": medians["split"] / medians["as written"]})
    table = pd.DataFrame(rows)
    print(f"{args.model}: {args.placer}'s split against the graph as written, new sessions on local:2")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for threads, runs in table.groupby("threads"):
        slow = int((runs["split / as written"] > 0.9).sum())
        print(f"{threads} inter-op threads: {slow} of {len(runs)} split sessions slow (> 0.9x), "
              f"split {runs['split ms'].min():.1f}-{runs['split ms'].max():.1f} ms, as written "
              f"{runs['as written ms'].min():.1f}-{runs['as written ms'].max():.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
