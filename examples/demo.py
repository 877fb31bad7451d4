"""The main job of `make demo`: place Inception-V3's training step on real devices.

On two TensorFlow worker processes of this machine (`--cluster local:2`, one core each, a
real link between them), or on the local GPUs when there are several, it:

1. profiles the training step there (cached: a second run skips this),
2. places it with every method, each placement simulated from the profile,
3. measures the best few predicted placements and the single device for real,
4. prints the comparison table and writes into OUT (default placeto-out/): the placed
   SavedModel of the fastest measured placement with its placement JSON, the comparison plot,
   the Gantt chart of that placement's simulated schedule, and the table as CSV.
   (The demo shows what each method does; it writes the fastest of a few runs each. `tf-placeto
   place` is what keeps a placement only when it is faster than the graph as written beyond
   the noise, timed in turns.)

    python -m examples.demo [--example NAME] [--out DIR] [--cluster SPEC]
                            [--measure-best N] [--repeats N]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from tf_placeto import _quiet

EXACT_TIME_LIMIT_S = 20     # the exact placer's search, within the demo's 10 minutes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3", help="a bundled example graph")
    parser.add_argument("--out", default="placeto-out", help="where the results go")
    parser.add_argument("--cluster", default=None,
                        help="where to measure (default: the local GPUs when there are "
                             "several, else local:2)")
    parser.add_argument("--measure-best", type=int, default=3, metavar="N",
                        help="placements measured for real besides the single device")
    parser.add_argument("--repeats", type=int, default=3, metavar="N",
                        help="timed runs per real measurement")
    parser.add_argument("--cache", default=None, help="where profiles are kept")
    args = parser.parse_args(argv)
    _quiet.set_tensorflow_environment()
    with _quiet.native_stderr_to_log() as log:
        ok = run(args)
    _quiet.remove_log(log)
    return 0 if ok else 1


def _where_to_run(cluster):
    """(devices spec, cluster spec): the local GPUs when there are several, else a cluster."""
    from tf_placeto.devices import DeviceSet

    if cluster is None:
        gpus = [d for d in DeviceSet.this_machine() if d.device_type == "GPU"]
        if len(gpus) >= 2:
            return str(len(gpus)), None
        cluster = "local:2"
    return None, cluster


def run(args) -> bool:
    from tf_placeto.log import progress_to

    start = time.perf_counter()

    def say(message):
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", flush=True)

    class SayProgress(logging.Handler):
        """The library's progress (the "tf_placeto" logger), timed like the demo's own."""

        def emit(self, record):
            say(record.getMessage())

    with progress_to(SayProgress()):
        return _demo(args, say)


def _demo(args, say) -> bool:
    import tf_placeto as tp
    from tf_placeto import methods
    from tf_placeto.compare import RealRuns, compare, printable
    from tf_placeto.measure.evaluation.measurer import SimulatedMeasurer
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.plots import comparison_plot, gantt
    from tf_placeto.workload import load_workload

    os.makedirs(args.out, exist_ok=True)
    source = f"examples:{args.example}"
    devices, cluster = _where_to_run(args.cluster)
    say(f"starting {cluster or f'the {devices} local GPUs'}")
    with open_runtime(devices, cluster) as runtime:
        say(runtime.describe())
        workload = load_workload(source, runtime, cache=args.cache)
        say(f"{len(workload.graph)} ops in {len(workload.groups)} groups; profile "
            f"{'found in the cache' if workload.profile_cached else 'made'}: "
            f"{workload.profile_dir}")
        table = compare([workload], [None], methods.names(), progress=say,
                        real=RealRuns(runtime, repeats=args.repeats, best=args.measure_best),
                        options={"time_limit": EXACT_TIME_LIMIT_S})
        problem = workload.problem()
        measured = table[(table["runs"] > 0) & (table["status"] == "ok")]
        if measured.empty:
            say("no placement ran: see the reasons in the table")
            print(printable(table))
            return False
        best = measured.loc[measured["step_s"].idxmin()]
        say(f"fastest measured: {best['method']}; writing its placed SavedModel")
        decision = table.attrs["group_devices"][(workload.name, problem.n_devices,
                                                  best["method"])]
        placement = tp.Placement(problem.placement(decision))
        device_set = tp.DeviceSet.from_strings(problem.device_names)
        [simulated] = SimulatedMeasurer(workload.graph, device_set, problem.simulation,
                                        schedule=True).evaluate([placement], [best["method"]])
    placed = os.path.join(args.out, f"{args.example}_placed")
    tp.apply_placement(workload.graph, placement, placed, devices=device_set, overwrite=True)
    files = {
        "placed SavedModel": placed,
        "its placement (op -> device)": placement.to_json(f"{placed}.placement.json"),
        "comparison table": _written(table.to_csv, os.path.join(args.out, "comparison.csv")),
        "comparison plot": comparison_plot(table, os.path.join(args.out, "comparison.png")),
        "Gantt chart": gantt(simulated.schedule, os.path.join(args.out, "gantt.png"),
                             title=f"{source}: {best['method']} (simulated schedule)"),
    }
    print()
    print(printable(table))
    single = measured[measured["method"] == "single"]
    print(f"\nfastest measured on {len(device_set)} devices: {best['method']}, "
          f"{best['step_s'] * 1e3:.0f} ms per step (median of {int(best['runs'])} runs)"
          + (f", {single['step_s'].iloc[0] / best['step_s']:.2f}x the single device"
             if len(single) else ""))
    for what, path in files.items():
        print(f"  {what:<30} {path}")
    say("done")
    return True


def _written(write, path: str) -> str:
    write(path, index=False)
    return path


if __name__ == "__main__":
    sys.exit(main())
