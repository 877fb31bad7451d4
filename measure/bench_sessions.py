"""Benchmark: one split placement in many new sessions, on cold or warm clusters, by worker threads.

A script, not a test.

    python -m measure.bench_sessions [--model branches] [--placer heft] [--sessions 8]
                                     [--threads 1 8] [--links warm] [--clusters 1]
                                     [--steps 10] [--trace] [--cpu]

The model (measure/real_models.py) is profiled on local:2 (cached) and split by the placer.
For each thread count T and each state of the links L, `--clusters` new clusters
`local:2,threads=T` run, in turn, `--sessions` new sessions of the graph as written and of the
split, each timed for `--steps` steps after one warm-up step; the settings take turns cluster
by cluster. A "warm" cluster first exchanges bulk tensors between its tasks
(tf_placeto.measure.runtimes.links, as open_runtime does); a "cold" one starts timing at once.
Printed: each session's median ms per step, split and as written, the split's ratio; then per
setting how many split sessions ran no faster than 0.9x as written ("slow") and the ratios
of each cluster's first session. With `--trace`, each split session also runs one traced
step, and the table says when each task started its first op that computed for at least
WORK_US (ms after the step's first op): a task that waits for its inputs starts late. With
`--cpu` (Linux), each split session also says, per step, how long each worker's threads ran
and how long they were ready to run but waited for the worker's core (/proc schedstat, summed
over the threads), and the summary compares the slow sessions with the others: a session
whose threads need more CPU time for the same ops ran on slower cores, one whose threads
wait longer was not given its core.

Three causes of slow sessions were found with it (docs/results/sessions.md). With one inter-op thread, a
worker serves its peer's RecvTensor calls only after the ops it has queued, and whether the
request comes before or after them is settled per session (8 threads, the default since,
answer at once). On a cold cluster, the first few dozen steps that move bulk data between
tasks are slow (warming the links, the default since, removes that). And on this 2-vCPU
virtual machine, both workers' threads sometimes need 15% to 60% more CPU time for the same
ops for as long as a session is open, while the graph as written, on one core, runs at its
usual speed: the cores run slower while both are busy, which no placement or setting here
controls.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import sys

WORK_US = 100.0   # --trace: an op that takes this long computes (receives and constants do not)


def first_work_ms(run_metadata) -> dict:
    """{"task N": ms from the traced step's first op to that task's first op of WORK_US or
    more}."""
    starts = {}
    for dev_stats in run_metadata.step_stats.dev_stats:
        task = "task " + re.search(r"/task:(\d+)", dev_stats.device)[1]
        for node in dev_stats.node_stats:
            took_us = (node.op_end_rel_nanos - node.op_start_rel_nanos) / 1e3
            if node.all_start_nanos and took_us >= WORK_US:
                starts.setdefault(task, []).append(node.all_start_nanos + node.op_start_rel_nanos)
    first = min((n.all_start_nanos for d in run_metadata.step_stats.dev_stats
                 for n in d.node_stats if n.all_start_nanos), default=0)
    return {task: (min(times) - first) / 1e6 for task, times in sorted(starts.items())}


def thread_times_ns(pid: int) -> tuple:
    """(ran, waited ready) summed over the threads of process `pid`, in ns (Linux schedstat:
    a thread that ends between two readings takes its share with it)."""
    ran = waited = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{thread}/schedstat") as schedstat:
                fields = schedstat.read().split()
        except OSError:
            continue
        ran, waited = ran + int(fields[0]), waited + int(fields[1])
    return ran, waited


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="branches")
    parser.add_argument("--placer", default="heft")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--links", nargs="+", default=["warm"], choices=["cold", "warm"])
    parser.add_argument("--clusters", type=int, default=1, help="new clusters per setting")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--trace", action="store_true",
                        help="trace one step of each split session: when each task first computes")
    parser.add_argument("--cpu", action="store_true",
                        help="per split session and step: each worker's threads' time run, "
                             "and ready but waiting")
    args = parser.parse_args(argv)

    import pandas as pd

    from measure import real_models, say
    from tf_placeto import methods
    from tf_placeto.measure.runtimes.runtime import parse_cluster
    from tf_placeto.measure.runtimes.runner import ModelRunner
    from tf_placeto.measure.runtimes.runtime import Runtime, open_runtime
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
                medians, extra = {}, {}
                for label, placement in (("as written", None), ("split", split)):
                    with runner.session(runtime, placement, 600) as steps:
                        steps.step()
                        cpu = args.cpu and placement is not None
                        started = [thread_times_ns(pid) for pid in cluster.pids] if cpu else []
                        medians[label] = statistics.median(
                            steps.step() for _ in range(args.steps)) * 1e3
                        if cpu:
                            for task, (first, last) in enumerate(zip(
                                    started, [thread_times_ns(pid) for pid in cluster.pids])):
                                for k, what in enumerate(("ran", "ready")):
                                    extra[f"task {task} {what} ms/step"] = \
                                        (last[k] - first[k]) / 1e6 / args.steps
                        if args.trace and placement is not None:
                            extra.update({f"{task} first work ms": ms for task, ms
                                           in first_work_ms(steps.traced_step()).items()})
                rows.append({"threads": threads, "links": links, "cluster": cluster_index + 1,
                             "session": session + 1,
                             "as written ms": medians["as written"],
                             "split ms": medians["split"],
                             "split / as written": medians["split"] / medians["as written"],
                             **extra})
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
        for column in (c for c in runs.columns if c.endswith("first work ms")):
            print(f"  {column}: {runs[column].min():.1f} to {runs[column].max():.1f}, median "
                  f"{runs[column].median():.1f}")
        slow = ratio > 0.9
        for column in (c for c in runs.columns if c.endswith("ms/step")):
            print(f"  {column}, median: slow sessions {runs[column][slow].median():.1f}, "
                  f"the others {runs[column][~slow].median():.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
