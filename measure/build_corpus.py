"""Build the corpus of real graphs (tf_placeto.examples.corpus) as compact cost profiles.

    python -m measure.build_corpus --out DIR [--audit] [--only NAME ...]
    python -m measure.build_corpus --out DIR --cluster-runtime [--cluster local:2]

Each model is built in a child process (a SavedModel, cached as measure/real_models.py's),
imported, grouped (at most --max-groups groups) and profiled on this machine's default runtime
for a simulated corpus, two logical CPUs of one process (as the policy tests' problems), then
kept as DIR/NAME.npz (tf_placeto.placers.compact), written whole or not at all. Models whose
file is already there are kept; one that fails to build or profile is reported and skipped
(the command then exits 1). DIR/manifest.csv lists every profile in DIR: name, family, ops,
groups, bytes, and the seconds its build and profile took here. With --audit, the models are
the audit set's (tf_placeto.examples.audit: families nothing is trained on or chosen by),
kept in a folder of their own.

With --cluster-runtime, one model (CLUSTER_MODEL) is profiled and calibrated on a cluster
(default local:2: two one-core worker processes) instead, and what the calibration measured
of the runtime (its link, its costs per task, per crossing tensor and per message) is kept as
DIR/cluster_runtime.json, which the "cluster" setting of the corpus's problems
(tf_placeto.placers.corpus_problems) simulates every graph's tasks with.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import time
from typing import Optional, Sequence

import pandas as pd

from tf_placeto.cache import build_once, cache_dir
from tf_placeto.errors import InputError, first_line
from tf_placeto.examples import audit, corpus
from tf_placeto.examples.corpus import SIGNATURE
from tf_placeto.files import write_atomically
from tf_placeto.graph.grouping import DEFAULT_MAX_GROUPS
from tf_placeto.graph.sources import Source
from tf_placeto.log import progress
from tf_placeto.measure.costs.calibration import Calibration
from tf_placeto.placers.compact import SUFFIX, CompactProfile
from tf_placeto.placers.corpus_problems import CLUSTER_RUNTIME

MANIFEST = "manifest.csv"
COLUMNS = ["name", "family", "ops", "groups", "bytes", "build_s", "profile_s"]
CLUSTER_MODEL = "transformer_encoder"   # small (243 ops), with many tensors to cross
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _model(name: str):
    """The corpus's or the audit set's model of that name (the two share no name)."""
    return corpus.MODELS[name] if name in corpus.MODELS else audit.MODELS[name]


def save(name: str, out: str) -> None:
    """Build the model and save it with its SIGNATURE signature (in the child)."""
    builder = _model(name).builder
    import tensorflow as tf  # heavy: loaded by the builders only

    module = builder()
    tf.saved_model.save(module, out, signatures={SIGNATURE: module.serve})


def build(name: str) -> str:
    """The model's SavedModel, built now in a child process when this version has none."""
    model = _model(name)
    path = cache_dir("corpus", f"{name}-v{model.version}"
                               f"-tf{importlib.metadata.version('tensorflow')}")
    return build_once(path, "measure.build_corpus", ["--save", name], name, cwd=REPOSITORY)


def default_runtime():
    """Two logical CPUs of this process: the runtime the corpus is profiled on."""
    from tf_placeto.devices import DeviceSet
    from tf_placeto.measure.runtimes.runtime import Runtime

    return Runtime.local(DeviceSet.local(2))


def profile_model(name: str, runtime, cache: Optional[str] = None,
                  max_groups: int = DEFAULT_MAX_GROUPS) -> CompactProfile:
    """Build, import, group and profile one model: its compact profile (not saved)."""
    from tf_placeto.workload import load_workload

    model = _model(name)
    start = time.monotonic()
    path = build(name)
    built = time.monotonic()
    workload = load_workload(Source(path, SIGNATURE), runtime, max_groups=max_groups,
                             cache=cache)
    return CompactProfile.of(
        workload.groups, workload.cost_model, name=name, family=model.family,
        description=model.description, builder_version=model.version,
        tensorflow=importlib.metadata.version("tensorflow"), runtime=runtime.describe(),
        max_groups=max_groups, build_s=round(built - start, 1),
        profile_s=round(time.monotonic() - built, 1))


def build_corpus(out: str, names: Optional[Sequence[str]] = None, runtime=None,
                 cache: Optional[str] = None, max_groups: int = DEFAULT_MAX_GROUPS,
                 audit_set: bool = False) -> dict:
    """Profile every model of `names` (default: all of the corpus, or of the audit set) whose
    file `out` lacks; {name: why} for those that failed. The manifest is written again after
    each model."""
    models = audit.MODELS if audit_set else corpus.MODELS
    names = list(models) if names is None else list(names)
    unknown = sorted(set(names) - set(models))
    if unknown:
        raise InputError(f"unknown {'audit' if audit_set else 'corpus'} models "
                         f"{', '.join(unknown)} (known: {', '.join(models)})")
    runtime = runtime or default_runtime()
    failed = {}
    with progress(names, desc="corpus", unit="model") as bar:
        for name in bar:
            bar.set_postfix_str(name)
            target = os.path.join(out, name + SUFFIX)
            if _whole(target):
                continue
            try:
                profile_model(name, runtime, cache, max_groups).save(target)
            except Exception as error:     # reported and skipped: the others still build
                failed[name] = first_line(error)
                bar.write(f"{name}: failed: {failed[name]}", file=sys.stderr)
            write_manifest(out)
    return failed


def measure_cluster_runtime(out: str, cluster: str = "local:2", cache: Optional[str] = None,
                            model: str = CLUSTER_MODEL) -> dict:
    """Profile and calibrate `model` on `cluster` and keep what the calibration measured of
    the runtime as out/CLUSTER_RUNTIME (the module's doc); returns it."""
    from tf_placeto.measure.runtimes.runtime import open_runtime
    from tf_placeto.workload import load_workload

    with open_runtime(cluster=cluster) as runtime:
        workload = load_workload(Source(build(model), SIGNATURE), runtime, cache=cache)
    cost_model = workload.cost_model
    if cost_model.calibration is None:
        raise InputError(f"{model} on {cluster}: the profile has no calibration (a cluster "
                         "of at least two tasks fits one)")
    record = {"runtime": cluster, "model": model, "devices": workload.profiled_devices,
              "links": cost_model.links.to_dict(orient="records"),
              "calibration": cost_model.calibration.to_json(),
              "saved": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    os.makedirs(out, exist_ok=True)
    write_atomically(os.path.join(out, CLUSTER_RUNTIME),
                     lambda file: json.dump(record, file, indent=1, sort_keys=True))
    return record


def _whole(path: str) -> bool:
    """Whether `path` holds a compact profile this version reads."""
    try:
        CompactProfile.load(path)
    except InputError:
        return False
    return True


def manifest(out: str) -> pd.DataFrame:
    """One row per compact profile in `out` (COLUMNS), in the registries' order."""
    rows = []
    for name in [*corpus.MODELS, *audit.MODELS]:
        path = os.path.join(out, name + SUFFIX)
        if os.path.isfile(path):
            meta = CompactProfile.load(path).meta
            rows.append({**{key: meta.get(key) for key in COLUMNS},
                         "bytes": os.path.getsize(path)})
    return pd.DataFrame(rows, columns=COLUMNS)


def write_manifest(out: str) -> pd.DataFrame:
    table = manifest(out)
    write_atomically(os.path.join(out, MANIFEST),
                     lambda file: file.write(table.to_csv(index=False)))
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the folder of the compact profiles")
    parser.add_argument("--audit", action="store_true",
                        help="the audit set's models (tf_placeto/examples/audit.py), not the "
                        "corpus's")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these models alone")
    parser.add_argument("--max-groups", type=int, default=DEFAULT_MAX_GROUPS)
    parser.add_argument("--cache", help="the profiles' cache (default: tf_placeto's)")
    parser.add_argument("--cluster-runtime", action="store_true",
                        help=f"measure the runtime of --cluster on {CLUSTER_MODEL} instead")
    parser.add_argument("--cluster", default="local:2",
                        help="the cluster --cluster-runtime measures")
    parser.add_argument("--save", nargs=2, metavar=("NAME", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.save:
        from tf_placeto import _quiet

        _quiet.set_tensorflow_environment()
        save(*args.save)
        return 0
    if not args.out:
        parser.error("--out is required")
    if args.cluster_runtime:
        record = measure_cluster_runtime(args.out, args.cluster, args.cache)
        print(f"{record['runtime']}, profiled on {record['model']}: "
              + Calibration(**record["calibration"]).describe())
        return 0
    failed = build_corpus(args.out, args.only, cache=args.cache, max_groups=args.max_groups,
                          audit_set=args.audit)
    table = write_manifest(args.out)
    print(table.to_string(index=False))
    print(f"{len(table)} profiles, {table['bytes'].sum() / 2**20:.2f} MiB in all"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
