"""Benchmark: simulated placements per second (a script, not a test).

    python -m measure.bench_simulator [--example inception_v3] [--devices 2 4 8]
                                      [--cluster local:2] [--batch 50] [--batches 7] [--stream K]

The project asks for at least 200 simulated placements per second on one core for the
Inception-V3 training step, at op level; the script pins itself to one core once the profile
is loaded (profiling on `--cluster` needs a core per worker, so `taskset` cannot). Costs
are the example's profile on `--cluster` (profiled first if the cache has none), simulated on 2,
4 and 8 devices like the profiled ones. Each batch simulates `--batch` uniformly random op
placements; the figure is the median over `--batches` batches. Random placements cut almost
every edge, so they are the expensive case: most tensors travel, and every transfer is three
events (two copies and the wire) where the profile measured a copy share. The synthetic graph
is a random layered DAG of the same size with the same costs, which shows the rate does not
hinge on Inception's shape. `--stream K` times the stream mode instead (K steps in flight,
simulator.stream): the stream is unrolled once per graph and device count, before the clock
starts, and the step column is seconds per step once the stream is full.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--devices", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--cluster", default="local:2", help="where the profile is made")
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stream", type=int, default=0, metavar="K",
                        help="time the stream mode with K steps in flight")
    args = parser.parse_args(argv)

    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.measure.simulator import lower_bound_us, simulate
    from tf_placeto.measure.simulator.stream import Stream
    from tf_placeto.workload import load_workload

    with open_runtime(cluster=args.cluster) as runtime:
        workload = load_workload(f"examples:{args.example}", runtime)
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})      # one core, as the target asks
    graph = workload.graph
    rng = np.random.default_rng(args.seed)
    problems = {f"examples:{args.example}": lambda n: workload.problem(n).simulation}
    problems[f"synthetic ({len(graph)} ops)"] = lambda n: synthetic_problem(
        workload.problem(n).simulation, rng)
    links = workload.cost_model.links.iloc[0]
    print(f"examples:{args.example}: {len(graph)} ops, {len(graph.data_edges)} data edges, "
          f"{len(graph.control_edges)} control edges; profiled on {args.cluster} (link "
          f"{links['latency_us']:.0f} us + bytes / {links['bytes_per_us']:.0f} B/us, copy share "
          f"{links['copy_share']:.2f}); batches of {args.batch} random placements, median of "
          f"{args.batches}")
    print(f"{'graph':<28} {'devices':>7} {'placements/s':>13} {'min':>8} {'max':>8} "
          f"{'step ms (median)':>17} {'lower bound ms':>15}")
    for name, build in problems.items():
        for n_devices in args.devices:
            problem = build(n_devices)
            if args.stream:
                stream = Stream(problem, args.stream)
                step_us = lambda placement: 1e6 / stream.simulate(placement).steps_per_s
            else:
                step_us = lambda placement: simulate(problem, placement).step_time_us
            step_us(np.zeros(problem.n_ops, dtype=np.int64))     # compile or load
            rates, steps = [], []
            for _ in range(args.batches):
                placements = rng.integers(0, n_devices, size=(args.batch, problem.n_ops))
                start = time.perf_counter()
                for placement in placements:
                    steps.append(step_us(placement))
                rates.append(args.batch / (time.perf_counter() - start))
            print(f"{name:<28} {n_devices:>7} {np.median(rates):>13.0f} {min(rates):>8.0f} "
                  f"{max(rates):>8.0f} {np.median(steps) / 1e3:>17.2f} "
                  f"{lower_bound_us(problem) / 1e3:>15.2f}")


def synthetic_problem(like, rng):
    """A random layered DAG shaped like `like` (a SimulationProblem): as many ops, edges and
    devices, the same costs and links; one output per op, inputs from the ~200 ops before it."""
    from tf_placeto.measure.simulator import SimulationProblem

    n_ops, n_data, n_control = like.n_ops, len(like.edge_tensor), len(like.control_src)
    consumers = rng.integers(1, n_ops, size=n_data + n_control)
    producers = np.maximum(consumers - rng.integers(1, 200, size=consumers.size), 0)
    return SimulationProblem(
        op_names=[f"op{k}" for k in range(n_ops)],
        compute_us=rng.permutation(like.compute_us),
        device_type_of=like.device_type_of,
        device_names=like.device_names,
        tensor_producer=np.arange(n_ops),
        tensor_bytes=rng.integers(0, 4_000_000, size=n_ops),
        edge_tensor=producers[:n_data],
        edge_consumer=consumers[:n_data],
        control_src=producers[n_data:],
        control_dst=consumers[n_data:],
        persistent_bytes=np.zeros(n_ops, dtype=np.int64),
        link_latency_us=like.link_latency_us,
        link_bytes_per_us=like.link_bytes_per_us,
        link_copy_share=like.link_copy_share,
        memory_capacity=like.memory_capacity,
        op_overhead_us=like.op_overhead_us,
    )


if __name__ == "__main__":
    main()
