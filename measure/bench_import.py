"""Benchmark: how long importing and grouping a bundled graph takes (a script, not a test).

    python -m measure.bench_import [--example inception_v3] [--repeats 5] [--max-groups 256]

Prints the median and spread of load (parsing the SavedModel), import (inlining function
bodies, shapes) and grouping (colocation, ordering, coarsening) over repeated runs. The example
is built and cached first if needed; that build is not timed.
"""

from __future__ import annotations

import argparse
import time


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-groups", type=int, default=256)
    args = parser.parse_args(argv)

    import pandas as pd

    import tf_placeto as tp
    from tf_placeto.examples import registry
    from tf_placeto.graph.importer import import_graph_def

    path = registry.saved_model_path(args.example)
    rows = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        source = tp.load_source(path)
        t1 = time.perf_counter()
        graph = import_graph_def(source.graph_def, source.fetches, source=source)
        t2 = time.perf_counter()
        groups = tp.group(graph, max_groups=args.max_groups)
        t3 = time.perf_counter()
        rows.append({"load_s": t1 - t0, "import_s": t2 - t1, "group_s": t3 - t2,
                     "total_s": t3 - t0})
    table = pd.DataFrame(rows)
    print(f"examples:{args.example}: {len(graph)} ops, {len(graph.data_edges)} data edges, "
          f"{len(groups)} groups (max {args.max_groups}); {args.repeats} runs")
    print(table.describe().loc[["50%", "min", "max"]].rename(index={"50%": "median"})
          .to_string(float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
