"""Benchmark: the messages TensorFlow sends between tasks, against real steps and the simulator.

A script, not a test.

    python -m measure.bench_messages [--model lookup] [--cluster local:2] [--placements 16]
                                     [--seed 1] [--budget 60] [--cache DIR] [--list N]

The model (measure/real_models.py) is profiled on the runtime (cached) and its evaluation
placements are those of measure.bench_calibration: the placers' decisions and random
placements the calibration never saw, timed for real in turns in two passes. For each, one
more step returns TensorFlow's partition graphs: their Send/Recv pairs between tasks are the
messages the step really exchanges, data and control (a control edge across tasks is a dummy
tensor), after Grappler rewrote the graph and the session placed its feeds and fetches. The
simulator's are its transfers between tasks under the calibrated profile; the counted ones
are tf_placeto.measure.costs.messages' count from Grappler run offline, each message once (as the
partition graphs list them, loops not multiplied). Printed per placement: the real step
(mean of the passes), the calibrated simulated step, the simulator's transfers, the counted
and the real messages; then the Spearman of each against the real steps, and of each count
against the real one. `--list N` prints the real messages of the first N placements (task -> task, tensor).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from measure.bench_calibration import add_timing_options, timed_twice
from tf_placeto.measure.runtimes.links import cross_task_messages
from tf_placeto.measure.costs.messages import TaskMessages


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="lookup")
    add_timing_options(parser, placements=16, budget_s=60.0)
    parser.add_argument("--list", type=int, default=0, metavar="N",
                        help="print the real messages of the first N placements")
    args = parser.parse_args(argv)

    import pandas as pd
    from scipy import stats

    import tf_placeto as tp
    from measure import say
    from tf_placeto.measure.evaluation.measurer import SimulatedMeasurer
    from tf_placeto.measure.runtimes.runner import ModelRunner
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.measure.simulator import simulate

    with open_runtime(cluster=args.cluster) as runtime:
        workload, labels, placements, real, ok = timed_twice(args.model, runtime, args)
        runner = ModelRunner(workload.graph)
        messages = []
        for label, placement in zip(labels, placements):
            say(f"{args.model}: the partition graphs of {label}")
            with runner.session(runtime, placement) as steps:
                steps.step()                                    # warm-up
                messages.append(cross_task_messages(steps.partition_graphs()))
    devices = tp.DeviceSet.from_strings(runtime.device_names)
    measurer = SimulatedMeasurer.from_profile(workload.graph, workload.cost_model, devices)
    counter = TaskMessages(workload.graph, runtime.device_names)   # each message once
    indices = [measurer.device_indices(placement) for placement in placements]
    table = pd.DataFrame({
        "placement": labels, "real_ms": real.mean(axis=0) * 1e3,
        "simulated_ms": [r.step_time_s * 1e3 for r in measurer.evaluate(placements, labels)],
        "simulated_transfers": [simulate(measurer.problem, i).task_transfers for i in indices],
        "counted_messages": [counter.count(i) for i in indices],
        "real_messages": [len(m) for m in messages], "ok": ok})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    kept = table[table.ok]
    for column in ("simulated_ms", "simulated_transfers", "counted_messages", "real_messages"):
        rho = stats.spearmanr(kept[column], kept.real_ms).statistic
        print(f"{column} against the real step: Spearman {rho:.2f}")
    for column in ("simulated_transfers", "counted_messages"):
        rho = stats.spearmanr(kept[column], kept.real_messages).statistic
        print(f"{column} against real messages: Spearman {rho:.2f}; equal on "
              f"{int(np.sum(kept[column] == kept.real_messages))} of {len(kept)}")
    for label, listed in list(zip(labels, messages))[:args.list]:
        print(f"\n{label}:")
        for src, dst, tensor in listed:
            print(f"  {src} -> {dst}  {tensor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
