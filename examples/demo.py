"""The main job of `make demo`, at this stage of the project.

Imports the Inception-V3 training step, groups it, spreads the groups over two logical CPU
devices, writes the placed SavedModel to placeto-out/, runs the original and the placed model
for real with full tracing, and checks that both give the same loss and that the placed ops
ran where the placement says.

    python -m examples.demo [--example NAME] [--out DIR] [--max-groups N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

from tf_placeto import _quiet

DEVICES = ("/device:CPU:0", "/device:CPU:1")


def contiguous_halves(groups) -> list:
    """Device per group: groups in topological order, cut where half the work is done.

    A contiguous cut crosses few edges, so few tensors travel between the devices.
    """
    work = groups.work
    done = work.cumsum() - work / 2
    return [DEVICES[int(d >= work.sum() / 2)] for d in done]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="inception_v3")
    parser.add_argument("--out", default="placeto-out")
    parser.add_argument("--max-groups", type=int, default=None)
    args = parser.parse_args(argv)
    _quiet.set_tensorflow_environment()
    with _quiet.native_stderr_to_log() as log:
        ok = run(args)
    _quiet.remove_log(log)
    return 0 if ok else 1


def run(args) -> bool:
    import numpy as np

    import tf_placeto as tp
    from examples import registry
    from measure.runner import run_traced

    start = time.perf_counter()

    def step(message):
        print(f"[{time.perf_counter() - start:6.1f}s] {message}", flush=True)

    step(f"building or loading examples:{args.example} ({registry.get(args.example).description})")
    source_path = registry.saved_model_path(args.example)
    t = time.perf_counter()
    graph = tp.import_graph(source_path)
    imported = time.perf_counter() - t
    t = time.perf_counter()
    groups = tp.group(graph, **({"max_groups": args.max_groups} if args.max_groups else {}))
    grouped = time.perf_counter() - t
    summary = groups.summary()
    step(f"imported {summary['num_ops']} ops ({summary['num_edges']} data edges) in "
         f"{imported:.2f}s; {summary['num_colocation_groups']} colocation groups; "
         f"{summary['num_groups']} groups in {grouped:.2f}s")

    placement = groups.placement_for(contiguous_halves(groups))
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f"{args.example}_placed")
    result = tp.apply_placement(graph, placement, out, overwrite=True)
    placement_file = os.path.join(args.out, f"{args.example}_placement.json")
    result.placement.to_json(placement_file)
    spread = Counter(result.placement.values())
    step("placed: " + ", ".join(f"{d}: {n} ops" for d, n in sorted(spread.items())))

    step("running the original and the placed model once each, fully traced, on 2 logical CPUs")
    original = run_traced(source_path, num_cpus=2)
    placed = run_traced(out, num_cpus=2)
    same = all(np.allclose(placed.outputs[k], original.outputs[k], rtol=1e-5)
               for k in original.outputs)
    ran = {n: d for n, d in placed.node_devices.items() if n in result.placement}
    wrong = [n for n, d in ran.items() if d != result.placement[n]]
    per_device = Counter(ran.values())

    print()
    print(f"  source       examples:{args.example} -> {source_path}")
    print(f"  ops          {summary['num_ops']} in {summary['num_groups']} groups "
          f"(largest {summary['largest_group_ops']} ops)")
    for key in original.outputs:
        print(f"  {key:<12} original {float(original.outputs[key]):.6f}   "
              f"placed {float(placed.outputs[key]):.6f}   {'same' if same else 'DIFFERENT'}")
    print("  traced       " + ", ".join(f"{d}: {n} ops" for d, n in sorted(per_device.items()))
          + f"; {len(wrong)} ops off their placed device")
    print(f"  written      {out}  (placed SavedModel)")
    print(f"               {placement_file}  (op -> device)")
    ok = same and not wrong and len(per_device) == len(DEVICES)
    print(f"\n{'OK' if ok else 'FAILED'}: the placed model "
          f"{'gives the same outputs and runs where placed' if ok else 'did not check out'}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
