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
simulator's are its transfers between tasks under the calibrated profile. Printed per
placement: the real step (mean of the passes), the simulated step, the simulator's transfers
and the real messages; then the Spearman of each against the real steps and between the two
counts. `--list N` prints the real messages of the first N placements (task -> task, tensor).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from measure.bench_calibration import add_timing_options, timed_twice
from tf_placeto.measure.links import cross_task_messages


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
    from tf_placeto.measure.measurer import SimulatedMeasurer
    from tf_placeto.measure.runner import ModelRunner
    from tf_placeto.measure.runtime import open_runtime
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
    task = dict(zip(measurer.problem.device_names, measurer.problem.device_task))
    simulated, transfers = [], []
    for placement in placements:
        result = simulate(measurer.problem, measurer.device_indices(placement), schedule=True)
        rows = result.schedule[result.schedule.kind == "transfer"]
        crossing = [task[src] != task[dst]
                    for src, dst in (device.split("->") for device in rows.device)]
        simulated.append(result.step_time_us / 1e3)
        transfers.append(int(np.sum(crossing)))
    table = pd.DataFrame({"placement": labels, "real_ms": real.mean(axis=0) * 1e3,
                          "simulated_ms": simulated, "simulated_transfers": transfers,
                          "real_messages": [len(m) for m in messages], "ok": ok})
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    kept = table[table.ok]
    for column in ("simulated_ms", "simulated_transfers", "real_messages"):
        rho = stats.spearmanr(kept[column], kept.real_ms).statistic
        print(f"{column} against the real step: Spearman {rho:.2f}")
    rho = stats.spearmanr(kept.simulated_transfers, kept.real_messages).statistic
    print(f"simulated transfers against real messages: Spearman {rho:.2f}; equal on "
          f"{int(np.sum(kept.simulated_transfers == kept.real_messages))} of {len(kept)}")
    for label, listed in list(zip(labels, messages))[:args.list]:
        print(f"\n{label}:")
        for src, dst, tensor in listed:
            print(f"  {src} -> {dst}  {tensor}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
