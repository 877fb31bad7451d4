"""Benchmark: do placers gain, for real, from knowing which kernels are slower with remote inputs?

    python -m measure.bench_remote_inputs [--example inception_v3] [--cluster local:2]
                                          [--methods m_sct m_etf heft optimal] [--rounds 5]

The profile finds op types that take longer when an input comes from another device (on
Inception-V3 with oneDNN: MaxPoolGrad, whose forward workspace stays behind), and every placer's
crossing cost adds that time (PlacementProblem.edge_extra_us). Each method decides twice: with
those costs ("aware") and with them zeroed ("blind"); where the two decisions differ, both are
measured for real (a decision two methods share, once), taking turns for `--rounds` rounds of
one timed run each, so that a change of load on the machine falls on both alike. Prints
simulated and real median step times.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--methods", nargs="+", default=["m_sct", "m_etf", "heft", "optimal"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    import pandas as pd

    from measure import say
    from tf_placeto import methods
    from tf_placeto.measure.evaluation.measurer import RealMeasurer
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.workload import load_workload

    with open_runtime(cluster=args.cluster) as runtime:
        workload = load_workload(f"examples:{args.example}", runtime)
        aware = workload.problem()
        blind = dataclasses.replace(aware, edge_extra_us=np.zeros_like(aware.edge_extra_us),
                                    feedback_extra_us=np.zeros_like(aware.feedback_extra_us))
        decisions, compared = {}, []    # label -> devices; (aware label, blind label)
        for method in args.methods:
            pair = []
            for kind, problem in (("aware", aware), ("blind", blind)):
                devices = methods.place(method, problem).group_devices
                label = next((known for known, other in decisions.items()
                              if np.array_equal(devices, other)), f"{method} {kind}")
                decisions[label] = devices
                pair.append(label)
            if pair[0] == pair[1]:
                say(f"{method}: the same decision either way")
            else:
                compared.append((method, *pair))
        decisions = {label: decisions[label]
                     for _, *pair in compared for label in pair}
        real = {label: [] for label in decisions}
        for k in range(args.rounds):
            measurer = RealMeasurer(workload.graph, runtime, repeats=1, trace_memory=False)
            for label, devices in decisions.items():
                [result] = measurer.evaluate([aware.placement(devices)], [label])
                real[label].append(result.step_time_s)
                say(f"round {k + 1}/{args.rounds}, {label}: {result.status} "
                    f"{result.step_time_s:.3f} s")
    table = pd.DataFrame({
        "decision": list(decisions),
        "simulated_ms": [aware.simulate(d).step_time_us / 1e3 for d in decisions.values()],
        "real_median_ms": [np.median(times) * 1e3 for times in real.values()],
        "real_runs_ms": [" ".join(f"{t * 1e3:.0f}" for t in times) for times in real.values()],
    })
    print(table.to_string(index=False, float_format=lambda v: f"{v:.0f}"))
    median = table.set_index("decision")["real_median_ms"]
    for method, mine, theirs in compared:
        print(f"{method}: aware ({mine}) / blind ({theirs}), real median step: "
              f"{median[mine] / median[theirs]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
