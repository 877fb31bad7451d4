"""The main job of `make demo`: place Inception-V3's training step on real devices.

It goes the way a user of `tf-placeto place` or `tf_placeto.optimize()` does. On two
TensorFlow worker processes of this machine (`--cluster local:2`, one core each, a real link
between them), or on the local GPUs when there are several, it:

1. places the step with `tf_placeto.place` (method auto, measured for real): the step is
   profiled there (cached: a second run skips this), the placers decide, the best few
   placements and the graph as written are timed in turns, the fastest is timed again in new
   sessions, and a placed SavedModel is written only if it was faster beyond the noise both
   times; it prints that verdict,
2. prints the scoreboard: every method's placement on the same profile, simulated
   (tf_placeto.compare),
3. writes into OUT (default placeto-out/) the scoreboard as CSV, its plot, and the Gantt chart
   of the simulated schedule of what was kept (the placement, or the graph as written).

    python -m examples.demo [--example NAME] [--out DIR] [--cluster SPEC] [--cache DIR]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from tf_placeto import frontend

EXACT_TIME_LIMIT_S = 20     # the exact placer's search, on the scoreboard


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3", help="a bundled example graph")
    parser.add_argument("--out", default="placeto-out", help="where the results go")
    parser.add_argument("--cluster", default=None,
                        help="where to measure (default: the local GPUs when there are "
                             "several, else local:2)")
    parser.add_argument("--cache", default=None, help="where profiles are kept")
    args = parser.parse_args(argv)
    frontend.set_tensorflow_environment()
    with frontend.native_stderr_to_log() as log:
        run(args)
    frontend.remove_log(log)
    return 0


def _where_to_run(cluster):
    """(devices spec, cluster spec): the local GPUs when there are several, else a cluster."""
    from tf_placeto.devices import DeviceSet

    if cluster is None:
        gpus = [d for d in DeviceSet.this_machine() if d.device_type == "GPU"]
        if len(gpus) >= 2:
            return str(len(gpus)), None
        cluster = "local:2"
    return None, cluster


def run(args) -> None:
    start = time.perf_counter()

    def say(message):
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", flush=True)

    class SayProgress(logging.Handler):
        """The library's progress (the "tf_placeto" logger), timed like the demo's own."""

        def emit(self, record):
            say(record.getMessage())

    with frontend.progress_to(SayProgress()):
        _demo(args, say)


def _demo(args, say) -> None:
    import tf_placeto as tp
    from tf_placeto import methods
    from tf_placeto.compare import compare, printable
    from tf_placeto.measure.evaluation.measurer import SimulatedMeasurer
    from tf_placeto.plots import comparison_plot, gantt

    os.makedirs(args.out, exist_ok=True)
    source = f"examples:{args.example}"
    devices, cluster = _where_to_run(args.cluster)
    say(f"placing {source} on {cluster or f'the {devices} local GPUs'}, measured for real")
    placed = os.path.join(args.out, f"{args.example}_placed")
    result = tp.place(source, "auto", tp.Target(devices=devices, cluster=cluster,
                                                cache=args.cache),
                      measure="real", out=placed, overwrite=True)
    outcome = result.outcome
    print(f"\nverdict: {outcome.verdict}")
    print("measured in turns, median step: " + ", ".join(
        f"{r.label} {r.step_time_s * 1e3:.1f} ms" if r.status == "ok" else f"{r.label} {r.status}"
        for r in outcome.measured))
    say("the scoreboard: every method on the same profile, simulated")
    table = compare([outcome.workload], [None], methods.names(), progress=say,
                    options={"time_limit": EXACT_TIME_LIMIT_S})
    print()
    print(printable(table))
    kept = "the graph as written" if result.placement is None else "the placement written"
    [simulated] = SimulatedMeasurer(outcome.workload.graph, outcome.devices,
                                    outcome.problem.simulation, schedule=True
                                    ).evaluate([result.placement], [kept])
    files = {
        "comparison table": _written(table.to_csv, os.path.join(args.out, "comparison.csv")),
        "comparison plot": comparison_plot(table, os.path.join(args.out, "comparison.png")),
        "Gantt chart": gantt(simulated.schedule, os.path.join(args.out, "gantt.png"),
                             title=f"{source}: {kept} (simulated schedule)"),
    }
    if result.out:
        files.update({"placed SavedModel": result.out,
                      "its placement (op -> device)": result.placement_file})
    print()
    for what, path in files.items():
        print(f"  {what:<30} {path}")
    say("done")


def _written(write, path: str) -> str:
    write(path, index=False)
    return path


if __name__ == "__main__":
    sys.exit(main())
