"""Benchmark: does a chain split over two workers pipeline, for real? (a script, not a test)

    python -m measure.bench_pipeline [--size 384] [--chain 6] [--in-flight 1 2 3]
                                     [--cluster local:2,threads=1] [--repeats 5]

A SavedModel whose step is two stages of `--chain` matmuls of `--size` x `--size`, one after
the other, is timed on the runtime as written (all on the first task) and split (the second
stage on the second task), in turns, as streams of K steps in flight for each K of
`--in-flight` (`tf-placeto measure --stream K`). Printed: milliseconds per step once the
stream is full, with the split's ratio to one task and its 95% interval. Split in two, a
stream of K >= 2 could at best halve the time per step; what it gets on the runtime is what
the transfers and RunGraph calls of a split cost against the second device it gains. The
default cluster's workers run one op at a time (threads=1), so that each step leaves a stage
as soon as its own ops are done; `--cluster local:2` gives them the default 8 inter-op
threads, on which the steps in flight move in convoys (docs/results/pipeline.md, "One op at
a time per worker").
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import pandas as pd

from measure import say
from tf_placeto.examples.probes import two_stage_model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=384)
    parser.add_argument("--chain", type=int, default=6, help="matmuls per stage")
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--cluster", default="local:2,threads=1")
    parser.add_argument("--repeats", type=int, default=5, help="rounds in turns per K")
    args = parser.parse_args(argv)

    from tf_placeto.api import import_graph
    from tf_placeto.measure.evaluation.interleaved import measure_interleaved
    from tf_placeto.measure.runtimes.runtime import open_runtime

    with tempfile.TemporaryDirectory() as scratch:
        graph = import_graph(two_stage_model(os.path.join(scratch, "two_stages"), args.size,
                                             args.chain))
        rows = []
        with open_runtime(cluster=args.cluster) as runtime:
            first, second = runtime.device_names[:2]
            split = {op.name: second if "stage_2" in op.name else first for op in graph.ops}
            for in_flight in args.in_flight:
                say(f"streams of {in_flight} in flight, one task and split, in turns")
                one, both = measure_interleaved(graph, runtime, [None, split],
                                                ["one task", "split"], repeats=args.repeats,
                                                trace=False, stream=in_flight)
                ratio = both.ratio_to_first
                rows.append({"in flight": in_flight, "one task ms/step": one.step_time_s * 1e3,
                             "split ms/step": both.step_time_s * 1e3,
                             "split / one task [95%]": f"{ratio['median']:.2f} "
                             f"[{ratio['low']:.2f}, {ratio['high']:.2f}]" if ratio else "-"})
    print(f"two stages of {args.chain} matmuls of {args.size}x{args.size} on {args.cluster}")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
