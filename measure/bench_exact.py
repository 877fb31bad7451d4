"""Benchmark: the exact placer's proven gap, HiGHS through highspy against scipy.

    python -m measure.bench_exact [--example inception_v3] [--groups 128] [--devices 2]
                                  [--cluster local:2] [--time-limits 30 60]
                                  [--objectives latency]

The profile of EXAMPLE on the runtime (cached), grouped into GROUPS, gives the problem; for
each objective and time limit the exact placer solves it through each interface: highspy,
started from the best fast decision, and scipy.optimize.milp, which takes no start. Printed:
the decision's objective and its step in the op-level simulator (how far the model is from
the judge), the proven lower bound and the gap, the best fast decision's objective beside
them, and the seconds taken. Target (issue 17): latency on Inception-V3 at
128 groups and 2 devices, gap at most 10% after 60 s, never worse than the best fast decision.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--groups", type=int, default=128)
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--cluster", default="local:2")
    parser.add_argument("--time-limits", type=float, nargs="+", default=[30.0, 60.0])
    parser.add_argument("--objectives", nargs="+", default=["latency"])
    args = parser.parse_args(argv)

    import pandas as pd

    from measure import say
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.placers import optimal
    from tf_placeto.placers.common import fast_decisions
    from tf_placeto.placers.objectives import MODEL_SCORES
    from tf_placeto.workload import load_workload

    with open_runtime(cluster=args.cluster) as runtime:
        workload = load_workload(f"examples:{args.example}", runtime, max_groups=args.groups)
    problem = workload.problem(args.devices)
    say(f"{args.example}: {problem.n_groups} groups on {problem.n_devices} devices")
    rows = []
    for objective in args.objectives:
        score = MODEL_SCORES[objective]
        fast = min(score(problem, decision) for _, decision in fast_decisions(problem))
        for time_limit in args.time_limits:
            for interface in ("highspy", "scipy"):
                say(f"{objective}, {time_limit:.0f} s, {interface}")
                began = time.monotonic()
                decision, info = optimal.place(problem, objective=objective,
                                               time_limit=time_limit, interface=interface)
                rows.append({"objective": objective, "time_limit_s": time_limit,
                             "interface": interface, "took_s": time.monotonic() - began,
                             "objective_ms": info["objective_us"] / 1e3,
                             "simulated_ms": problem.evaluate(decision).us_per_step / 1e3,
                             "bound_ms": (info["bound_us"] or float("nan")) / 1e3,
                             "gap": info["gap"], "best_fast_ms": fast / 1e3,
                             "found_by": info["incumbent"]})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
