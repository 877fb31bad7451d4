"""Benchmark: does `place` make real models faster, measured apart from it? (a script, not a test)

    python -m measure.bench_real_wins [--models resnet50,lookup,...] [--cache DIR]
                                      [--timeout 1800] [--budget 120] [--json FILE]
                                      [--place-args "--method placeto --start random"]

For each model of measure/real_models.py (built once, cached; by default the real set, and
`--models` may name the audit set's too), one at a time, runs
`tf-placeto place SOURCE --cluster local:2 --json --out OUT [PLACE-ARGS]` (the default
`place` unless --place-args chooses a method or its options) and reads what it claims:
predicted and measured step as written -> placed, and, when it gives them, whether it wrote a
model and the candidates it measured. Then it re-measures the written model against the
source, apart from `place`: on a fresh local:2 cluster, `--sessions` times in turn, both
SavedModels are loaded from their files into new sessions and timed in turns
(tf_placeto.measure.evaluation.noise: at least 6 rounds, then until the ratio is known to 5% or the
session's share of `--budget` seconds ends). The rounds of all the sessions give written /
source round by round with its 95% interval; each session's own median ratio is kept too.
With `--method placeto`, the table also gives the policy's own answer and the best point on
its walk, both simulated, as `place` reports them (it writes the best point on the walk).
(Measuring each with its own `tf-placeto measure`, as the users who reported slowdowns did,
moved one pair by 0.88x to 1.16x between repetitions: a fresh cluster's level varies more
than the gains asked for. And one session of a split can run slow for as long as it is open:
on branches, up to 1 in 5 new sessions of the split, with the machine's state, ran above
0.9x of the source, up to 1.12x; so one session is one draw: docs/results/sessions.md.)
Prints one table (stdout), the geometric mean of the re-measured ratios placed / as written,
counting a model left unwritten as 1 (its user keeps the source), how many written models
were slower beyond the noise, and how many of the re-measuring sessions ran slower than the
source.
A model whose command fails becomes a row with the first line of the error; the others
still run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import subprocess
import sys
import tempfile
import time

import pandas as pd

from measure import real_models, say

CLUSTER = "local:2"
STEP_TIMEOUT_S = 600.0       # a re-measured step that takes longer fails
# How the command line starts the one line it prints about a failure (tf_placeto/cli/__init__.py).
ERROR_PREFIXES = ("tf-placeto: failed:", "tf-placeto: error:", "tf-placeto: interrupted")


class CommandFailed(Exception):
    """A tf-placeto command exited non-zero or ran out of time; the message is one line."""


def tf_placeto(*args: str, deadline: float):
    """The JSON a tf-placeto command prints (its last stdout line); the same command as the
    installed `tf-placeto`, run with this interpreter, stopped at `deadline` (monotonic)."""
    started = time.monotonic()
    try:
        result = subprocess.run([sys.executable, "-m", "tf_placeto.cli", *args],
                                capture_output=True, text=True,
                                timeout=max(deadline - started, 1.0))
    except subprocess.TimeoutExpired:
        raise CommandFailed(f"{args[0]} ran past the model's time limit") from None
    say(f"  {args[0]}: {time.monotonic() - started:.0f} s, exit {result.returncode}")
    try:
        printed = json.loads((result.stdout.strip().splitlines() or [""])[-1])
    except ValueError:
        printed = None
    if result.returncode != 0:
        rows = printed if isinstance(printed, list) else []   # measure's rows, printed first
        reasons = "; ".join(f"{row['status']}: {row['reason']}" for row in rows
                            if isinstance(row, dict) and row.get("status") not in (None, "ok"))
        raise CommandFailed(f"{args[0]}: {error_line(result.stderr)}"
                            + (f" ({reasons})" if reasons else ""))
    if printed is None:
        raise CommandFailed(f"{args[0]}: no JSON on stdout: {result.stdout[-200:]!r}")
    return printed


def error_line(stderr: str) -> str:
    """The first line that says why a command failed: its progress lines come before it."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()] or ["no output"]
    return next((line for line in lines if line.startswith(ERROR_PREFIXES)), lines[-1])


def remeasure(source: str, written: str, budget_s: float, sessions: int) -> dict:
    """The written SavedModel against its source on a fresh cluster, in `sessions` pairs of
    new sessions one after the other, each pair timed in turns: the medians and written /
    source round by round over all the rounds, and each session's own median ratio."""
    import tensorflow as tf  # heavy: only once place has written a model

    from tf_placeto.graph.importer import import_source
    from tf_placeto.measure.runtimes.cluster import WorkerDied
    from tf_placeto.measure.evaluation.noise import interleave, median_interval, ratio_interval
    from tf_placeto.measure.runtimes.runner import ModelRunner, failure
    from tf_placeto.measure.runtimes.runtime import open_runtime

    runners = [ModelRunner(import_source(path)) for path in (source, written)]
    before_s, after_s, session_ratios = [], [], []
    try:
        with open_runtime(cluster=CLUSTER) as runtime:
            for _ in range(sessions):
                with contextlib.ExitStack() as opened:
                    steps = [opened.enter_context(runner.session(
                        runtime, timeout_s=STEP_TIMEOUT_S)) for runner in runners]
                    for step in steps:
                        step.step()                                  # warm-up
                    before, after = interleave([step.step for step in steps], "auto",
                                               budget_s / sessions, min_rounds=6)
                for series in (before, after):
                    if series.error is not None:
                        raise CommandFailed(
                            f"re-measure: {failure(series.error, STEP_TIMEOUT_S)[1]}")
                before_s += before.times_s
                after_s += after.times_s
                session_ratios.append(ratio_interval(after.times_s, before.times_s).median)
    except (tf.errors.OpError, WorkerDied) as error:
        raise CommandFailed(f"re-measure: {failure(error, STEP_TIMEOUT_S)[1]}") from None
    ratio = ratio_interval(after_s, before_s)
    return {"remeasured_before_s": median_interval(before_s).median,
            "remeasured_after_s": median_interval(after_s).median,
            "remeasured_rounds": len(after_s), "session_ratios": session_ratios,
            "ratio": ratio.median, "ratio_low": ratio.low, "ratio_high": ratio.high}


def bench(name: str, out_dir: str, args) -> dict:
    """One row: what `place` reported for the model and the independent re-measure."""
    row = {"model": name}
    deadline = time.monotonic() + args.timeout
    cache_args = ["--cache", args.cache] if args.cache else []
    try:
        source = real_models.build(name)
        out = os.path.join(out_dir, name)
        say(f"{name}: placing {source}")
        placed = tf_placeto("place", source, "--cluster", CLUSTER, "--json", "--out", out,
                            *cache_args, *shlex.split(args.place_args), deadline=deadline)
        row.update({key: placed.get(key) for key in
                    ("ops", "groups", "predicted_before_s", "predicted_after_s",
                     "measured_before_s", "measured_after_s", "measured_candidates",
                     "measured_again", "policy_step_s", "best_on_walk_step_s")})
        row["place_says_written"] = placed.get("written")
        row["written"] = os.path.isfile(os.path.join(out, "saved_model.pb"))
        if row["written"]:
            say(f"{name}: re-measuring {source} against {out}, in turns")
            row.update(remeasure(source, out, args.budget, args.sessions))
    except (CommandFailed, RuntimeError) as error:
        row["error"] = str(error)
    return row


def _ms(before, after) -> str:
    return "-" if before is None or after is None else f"{before * 1e3:.1f} -> {after * 1e3:.1f}"


def _candidates(candidates) -> str:
    """Each measured candidate as `method x0.93 [0.90, 0.97]`: its step over the graph as
    written's, round by round, with the 95% interval (the graph as written itself left out)."""
    return "; ".join(f"{c['label']} x{c['ratio_median']:.2f} [{c['ratio_low']:.2f}, "
                     f"{c['ratio_high']:.2f}]" if c.get("ratio_median") is not None
                     else f"{c['label']} {c['status']}"
                     for c in candidates or [] if c["label"] != "as written") or "-"


def _written(row) -> str:
    """Whether OUT holds a model, and what place's JSON claims where that differs."""
    if "written" not in row:
        return "-"
    said = row.get("place_says_written")
    return ("yes" if row["written"] else "no") + (
        "" if said is None or said == row["written"] else f" (place says {said})")


def table(rows: list) -> pd.DataFrame:
    return pd.DataFrame([{
        "model": row["model"],
        "ops": row.get("ops") or "-",
        "groups": row.get("groups") or "-",
        "predicted (ms)": _ms(row.get("predicted_before_s"), row.get("predicted_after_s")),
        "policy alone / best on walk (ms, simulated)": (
            f"{row['policy_step_s'] * 1e3:.1f} / {row['best_on_walk_step_s'] * 1e3:.1f}"
            if row.get("policy_step_s") is not None else "-"),
        "measured by place (ms)": _ms(row.get("measured_before_s"), row.get("measured_after_s")),
        "candidates": _candidates(row.get("measured_candidates")),
        "again, new sessions": _candidates(row.get("measured_again")),
        "written": _written(row),
        "re-measured (ms)": _ms(row.get("remeasured_before_s"), row.get("remeasured_after_s")),
        "ratio [95%]": (f"{row['ratio']:.2f} [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}]"
                        if "ratio" in row else "-"),
        "per session": " ".join(f"{r:.2f}" for r in row.get("session_ratios", [])) or "-",
        "error": row.get("error", ""),
    } for row in rows])


def geometric_mean_ratio(rows: list) -> tuple:
    """(geometric mean, models counted): unwritten models count as 1, failures not at all."""
    ratios = [row.get("ratio", 1.0) for row in rows if "error" not in row]
    if not ratios:
        return math.nan, 0
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)), len(ratios)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(real_models.MODELS),
                        help="comma-separated names (default: all of measure/real_models.py; "
                             "the audit set's may be named too)")
    parser.add_argument("--cache", default=None, help="passed to place")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds a model's place may take")
    parser.add_argument("--budget", type=float, default=120.0,
                        help="seconds of re-measuring in turns, shared by the sessions, "
                             "once each has run 6 rounds")
    parser.add_argument("--sessions", type=int, default=3,
                        help="pairs of new sessions the re-measure runs one after the other")
    parser.add_argument("--json", metavar="FILE", help="also write the rows here")
    parser.add_argument("--place-args", default="",
                        help="more arguments for place, in one string (for example "
                             "\"--method placeto --start random\"; default: none, the "
                             "default place)")
    args = parser.parse_args(argv)
    try:
        names = real_models.model_names(args.models)
    except ValueError as error:
        parser.error(str(error))

    with tempfile.TemporaryDirectory(prefix="real-wins-") as out_dir:
        rows = [bench(name, out_dir, args) for name in names]
    with pd.option_context("display.max_colwidth", 100, "display.width", 250):
        print(table(rows).to_string(index=False))
    mean, counted = geometric_mean_ratio(rows)
    print(f"geometric mean of re-measured placed / as written: {mean:.2f} over {counted} "
          f"models (unwritten count as 1.00; {len(rows) - counted} failed)")
    slower = [row["model"] for row in rows if row.get("ratio_low", 0.0) > 1.0]
    print(f"written and slower than the source beyond the noise: {len(slower)}"
          + (f" ({', '.join(slower)})" if slower else ""))
    session_ratios = [r for row in rows for r in row.get("session_ratios", [])]
    print(f"re-measuring sessions in which the written model ran slower than the source: "
          f"{sum(r > 1.0 for r in session_ratios)} of {len(session_ratios)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(rows, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
