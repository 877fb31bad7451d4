"""Do the commands work on every real model, on a cluster and in one process? (a script, not a test)

    python -m measure.bench_every_runtime [--models lstm,gru,...] [--cache DIR]
                                          [--timeout 1800] [--json FILE]

For each model of measure/real_models.py (built once, cached) and each runtime (`--cluster
local:2`, two worker processes, and `--devices 2`, two devices in one process), runs as a
user would:
- `tf-placeto profile SOURCE RUNTIME --calibrate 0 --json`;
- `tf-placeto place SOURCE RUNTIME --method m_etf --simulate --out OUT --json`: a placement
  that splits the graph, written;
- `tf-placeto measure SOURCE RUNTIME --placement OUT.placement.json --repeats 3 --json`: that
  split run for real;
- `tf-placeto compare SOURCE RUNTIME --methods single,m_etf --repeats 2 --json`;
- `tf-placeto place SOURCE RUNTIME --json --out OUT2`: the default job, measured;
then runs the source and the written OUT on the runtime itself, both as written, with the
same inputs, and checks that they give the same outputs. Prints a table (stdout): per model
and runtime, each command's outcome (ok, or the first line of its error) and whether the
outputs match. A command that fails is a cell; the others still run.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np
import pandas as pd

from measure import real_models, say
from measure.bench_real_wins import CommandFailed, tf_placeto

DEFAULT_MODELS = ("lstm", "gru", "transformer", "resnet50", "control_flow", "lookup",
                  "train_step")
# open_runtime's arguments; the command line's are the same as flags
RUNTIMES = {"local:2": {"cluster": "local:2"}, "devices 2": {"devices": "2"}}


def commands(source: str, runtime: list, cache: list, work: str, deadline: float) -> tuple:
    """({command: "ok" or its error line, "split over": devices the split placement uses},
    the written split model's path or None)."""
    split = os.path.join(work, "split")
    steps = {
        "profile": ("profile", source, *runtime, "--calibrate", "0", "--json", *cache),
        "place split": ("place", source, *runtime, "--method", "m_etf", "--simulate",
                        "--out", split, "--overwrite", "--json", *cache),
        "measure split": ("measure", source, *runtime, "--placement",
                          f"{split}.placement.json", "--repeats", "3", "--json", *cache),
        "compare": ("compare", source, *runtime, "--methods", "single,m_etf", "--repeats", "2",
                    "--json", *cache),
        "place": ("place", source, *runtime, "--out", os.path.join(work, "placed"),
                  "--overwrite", "--json", *cache),
    }
    outcome = {}
    for name, args in steps.items():
        try:
            tf_placeto(*args, deadline=deadline)   # measure: exit 1 when the split fails
            outcome[name] = "ok"
        except CommandFailed as failure:
            outcome[name] = str(failure)
    written = os.path.isfile(os.path.join(split, "saved_model.pb"))
    if written:
        with open(f"{split}.placement.json") as placement:
            outcome["split over"] = len(set(json.load(placement).values()))
    return outcome, (split if written else None)


def same_outputs(source: str, written: str, runtime: dict) -> str:
    """Run both as written on the runtime (open_runtime's arguments), same inputs: "yes", or
    how they differ."""
    import tf_placeto as tp
    from tf_placeto.measure.runtimes.runner import OK, ModelRunner
    from tf_placeto.measure.runtimes.runtime import open_runtime

    def outputs(path, running):
        result = ModelRunner(tp.import_graph(path)).run(running, None, warmup=0, repeats=1)
        if result.status != OK:
            raise CommandFailed(f"{os.path.basename(path)}: {result.status}: {result.reason}")
        return result.outputs

    try:
        with open_runtime(**runtime) as running:
            expected, got = outputs(source, running), outputs(written, running)
    except CommandFailed as failure:
        return str(failure)
    differing = [key for key in expected if not _equal(expected[key], got.get(key))]
    return "yes" if not differing else f"differ in {', '.join(differing)}"


def _equal(a, b) -> bool:
    """Equal values: floats within float32 rounding of a different op order."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" and b.dtype.kind in "fc":
        return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-4, atol=1e-5))
    return bool(np.array_equal(a, b))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--cache", help="profiles and results (default: the user's cache)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds per model and runtime for all its commands")
    parser.add_argument("--json", help="also write the rows as JSON to this file")
    args = parser.parse_args(argv)
    cache = ["--cache", args.cache] if args.cache else []
    rows = []
    try:
        names = real_models.model_names(args.models)
    except ValueError as error:
        parser.error(str(error))
    for model in names:
        say(f"{model}: building")
        source = real_models.build(model)
        for runtime_name, runtime in RUNTIMES.items():
            say(f"{model} on {runtime_name}")
            started = time.monotonic()
            flags = [item for name, value in runtime.items() for item in (f"--{name}", value)]
            with tempfile.TemporaryDirectory(prefix=f"bench-{model}-") as work:
                outcome, split = commands(source, flags, cache, work,
                                          deadline=started + args.timeout)
                matched = same_outputs(source, split, runtime) if split else \
                    "no split model written"
            rows.append({"model": model, "runtime": runtime_name, **outcome,
                         "same outputs": matched,
                         "minutes": round((time.monotonic() - started) / 60, 1)})
            say(json.dumps(rows[-1]))
    table = pd.DataFrame(rows)
    with pd.option_context("display.max_colwidth", 80, "display.width", 250):
        print(table.to_string(index=False))
    working = table.drop(columns=["model", "runtime", "minutes", "split over"], errors="ignore")
    good = ((working == "ok") | (working == "yes")).all(axis=1)
    print(f"\n{int(good.sum())} of {len(table)} model x runtime rows: every command ok and the "
          "written model gives the source's outputs")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)


if __name__ == "__main__":
    main()
