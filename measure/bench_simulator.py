"""Benchmark: simulated placements per second (a script, not a test).

    taskset -c 0 python -m measure.bench_simulator [--example inception_v3] [--devices 2 4 8]
                                                   [--batch 50] [--batches 7]

The project asks for at least 200 simulated placements per second on one core for the
Inception-V3 training step; `taskset -c 0` pins the process to one core. Each batch simulates
`--batch` uniformly random op placements; the figure is the median over `--batches` batches.
Random placements cut almost every edge, so they are the expensive case: most tensors travel.

Costs are a stand-in until the profiler's measured per-op times exist: the static work estimate
(FLOPs or elements written) / 1e4 as microseconds. Links use the figures of Placeto's K80
simulator (REFERENCE.md): 25 us latency, 7,600 bytes/us, 5.7 us after each op. The synthetic
graph is a random layered DAG of the same size with the same costs' spread, which shows the
rate does not hinge on Inception's shape.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

LATENCY_US = 25.0
BYTES_PER_US = 7600.0
OP_OVERHEAD_US = 5.7


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import tf_placeto as tp
    from measure.simulator import SimulationProblem, lower_bound_us, simulate
    from tf_placeto.graph.work import estimate_work

    graph = tp.import_graph(f"examples:{args.example}")
    compute_us = estimate_work(graph) / 1e4
    rng = np.random.default_rng(args.seed)
    problems = {f"examples:{args.example}": lambda n: SimulationProblem.from_op_graph(
        graph, compute_us, [f"/device:GPU:{k}" for k in range(n)], None, LATENCY_US,
        BYTES_PER_US, op_overhead_us=OP_OVERHEAD_US)}
    problems[f"synthetic ({len(graph)} ops)"] = lambda n: synthetic_problem(
        len(graph), len(graph.data_edges), len(graph.control_edges), compute_us, n, rng)
    print(f"examples:{args.example}: {len(graph)} ops, {len(graph.data_edges)} data edges, "
          f"{len(graph.control_edges)} control edges; batches of {args.batch} random "
          f"placements, median of {args.batches}")
    print(f"{'graph':<28} {'devices':>7} {'placements/s':>13} {'min':>8} {'max':>8} "
          f"{'step ms (median)':>17} {'lower bound ms':>15}")
    for name, build in problems.items():
        for n_devices in args.devices:
            problem = build(n_devices)
            simulate(problem, np.zeros(problem.n_ops, dtype=np.int64))   # compile or load
            rates, steps = [], []
            for _ in range(args.batches):
                placements = rng.integers(0, n_devices, size=(args.batch, problem.n_ops))
                start = time.perf_counter()
                for placement in placements:
                    steps.append(simulate(problem, placement).step_time_us)
                rates.append(args.batch / (time.perf_counter() - start))
            print(f"{name:<28} {n_devices:>7} {np.median(rates):>13.0f} {min(rates):>8.0f} "
                  f"{max(rates):>8.0f} {np.median(steps) / 1e3:>17.2f} "
                  f"{lower_bound_us(problem) / 1e3:>15.2f}")


def synthetic_problem(n_ops, n_data_edges, n_control_edges, costs, n_devices, rng):
    """A random layered DAG: one output per op, inputs drawn from the ~200 ops before it."""
    from measure.simulator import SimulationProblem

    consumers = rng.integers(1, n_ops, size=n_data_edges + n_control_edges)
    producers = np.maximum(consumers - rng.integers(1, 200, size=consumers.size), 0)
    return SimulationProblem(
        op_names=[f"op{k}" for k in range(n_ops)],
        compute_us=rng.permutation(costs)[:n_ops],
        device_type_of=np.zeros(n_devices, dtype=np.int64),
        device_names=[f"/device:GPU:{k}" for k in range(n_devices)],
        tensor_producer=np.arange(n_ops),
        tensor_bytes=rng.integers(0, 4_000_000, size=n_ops),
        edge_tensor=producers[:n_data_edges],
        edge_consumer=consumers[:n_data_edges],
        control_src=producers[n_data_edges:],
        control_dst=consumers[n_data_edges:],
        persistent_bytes=np.zeros(n_ops, dtype=np.int64),
        link_latency_us=np.where(np.eye(n_devices, dtype=bool), 0.0, LATENCY_US),
        link_bytes_per_us=np.where(np.eye(n_devices, dtype=bool), np.inf, BYTES_PER_US),
        memory_capacity=np.full(n_devices, np.inf),
        op_overhead_us=OP_OVERHEAD_US,
    )


if __name__ == "__main__":
    main()
