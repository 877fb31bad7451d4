"""Benchmark: the exact contiguous max-load DP on Tarnawski et al.'s instances, against theirs,
the integer programs over any split, and their baselines.

    python -m measure.bench_tarnawski INSTANCES [--their-dp PATH] [--repeats 3]
                                      [--only NAME ...] [--skip-theirs NAME ...]
                                      [--their-timeout 900] [--their-memory-gb 16]
                                      [--ip-seconds 60] [--no-latency]
                                      [--project NAME ...]

INSTANCES is the folder of their published inputs (throughput-inputs/, human-experts/). For
each throughput instance: its nodes, our blocks and ideals, our DP's max-load and median
seconds (reading the file and solving; numba's code is loaded before the first timing). With
`--their-dp`, their dp.cpp compiled as their README says (g++ -O3 throughput-dp/dp.cpp), run
on the same file in turns with ours: its max-load and median seconds, the ratio of times, and
whether the optima agree; their split is recounted with our accounting too. Where a layer
graph has an experts' split, its max-load (a training graph takes its inference split, the
backward nodes following their colour class, as their `dp -expert` does). Target: within 3x
their time on every instance but Inception-V3's layer graphs, where their DP runs out of
memory (16 GB).

Then, on each throughput instance: the integer program over any split (program.py) started
from the DP's split, its max-load, proven gap and seconds (`--ip-seconds` each); their
baselines (baselines.py: everything on one accelerator, local search with 10 restarts, the
PipeDream-style partitioner); the project's placers on the graph's PlacementProblem
(cost_graphs.METHODS; by default the fast ones, `--project` names others); and each over the
DP's max-load (below 1: better than the best contiguous split). On each latency instance
(latency-inputs/): the latency of their greedy, of the DP's split and of the experts', and the
latency program's from the best of those, with its gap and seconds, each over the greedy's.
Where the experts' split breaks the instance's rules (more accelerators than it has, more
memory on one), the latency program under the experts' rules too, from their split, over
theirs. Target: the program at or below the greedy and the experts. `--only NAME` keeps the
instances whose path contains NAME (`--only latency-inputs`: the latency instances alone).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import pandas as pd

from measure import say
from tf_placeto.errors import PlacementError
from tf_placeto.cost_graphs import METHODS, Request
from tf_placeto.graph.cost_graph import expert_file, read_cost_graph, read_expert_split
from tf_placeto.log import progress, ticking
from tf_placeto.placers.contiguous.accounting import (accelerator_memory, infeasibility, latency,
                                                      max_load)
from tf_placeto.placers.contiguous.baselines import (greedy_latency, local_search,
                                                     one_accelerator, pipedream)
from tf_placeto.placers.contiguous.dp import solve_max_load
from tf_placeto.placers.contiguous.ideals import TooManyIdeals
from tf_placeto.placers.contiguous.program import (solve_latency_program,
                                                   solve_max_load_program)

# The nodes whose out-edges their dp.cpp leaves out of PipeDream's biconnected components, by
# node id, for the graphs it knows by their node counts (BERT-24's and GNMT's layer graphs).
THEIR_PIPEDREAM_IGNORE = {"bert24": (4, 37), "gnmt": (2, 100, 40, 137, 46, 142)}
# The project's placers (cost_graphs.METHODS) that decide within seconds on every instance.
PROJECT_PLACERS = ("metis", "m_topo", "m_etf", "m_sct", "heft")
# The DP's split is a latency baseline where it has at most this many ideals: with memory
# binding, Inception-V3's 36,596 take minutes.
LATENCY_DP_IDEALS = 20_000


def ours(path: pathlib.Path, name: str):
    """(seconds, max-load, split, info) of reading `path` and solving it."""
    started = time.perf_counter()
    graph = read_cost_graph(path)
    with progress(desc=name, unit="ideal", leave=False) as bar:
        def advance(done, total):
            bar.total = total
            bar.update(done - bar.n)
        load, split, info = solve_max_load(graph, progress=advance)
    return time.perf_counter() - started, load, split, info


def program(solve, graph, start, seconds: float, name: str):
    """(value, info) of a program of program.py from `start`, its search shown in a bar."""
    with ticking(seconds, f"{name} program") as bar:
        def show(incumbent, bound):
            bar.set_postfix_str(f"best {incumbent:.6g}, bound {bound:.6g}", refresh=False)
        value, _, info = solve(graph, start=start, time_limit_s=seconds, progress=show)
    return value, info


def against_dp(graph, path: pathlib.Path, name: str, dp_load: float, dp_split, seconds,
               project=()):
    """The program over any split from the DP's split, their baselines and the project's
    placers named in `project` (cost_graphs.METHODS), each with its max-load over the DP's."""
    ip, info = program(solve_max_load_program, graph, dp_split, seconds, name)
    ignore = None
    if path.parent.name == "LayerGraphs":
        ignore = next((ids for stem, ids in THEIR_PIPEDREAM_IGNORE.items()
                       if path.stem.startswith(stem)), None)
    row = {"instance": name, "dp": dp_load, "ip": ip, "ip_gap": info["gap"],
           "ip_s": info["seconds"], "one": one_accelerator(graph)[0],
           "local": local_search(graph)[0], "pipedream": pipedream(graph, ignore)[0]}
    for method in project:
        row[method] = max_load(graph, METHODS[method].decide(graph, Request())[0])
    row.update({f"{key}/dp": row[key] / dp_load
                for key in ("ip", "one", "local", "pipedream", *project)})
    return row


def latency_row(instances: pathlib.Path, path: pathlib.Path, seconds: float):
    """Latency of their greedy, the DP's split and the experts', and of the latency program
    from the best of them, each over the greedy's."""
    name = f"{path.parent.name}/{path.stem}"
    graph = read_cost_graph(path)
    notes, splits = [], {"greedy": greedy_latency(graph)[1]}
    try:
        # their max-load DP baseline; where memory binds its pruning weakens: a cap on ideals
        splits["dp"] = solve_max_load(graph, max_ideals=LATENCY_DP_IDEALS)[1]
    except TooManyIdeals:
        notes.append(f"DP: over {LATENCY_DP_IDEALS:,} ideals")
    values = {key: latency(graph, split) if split is not None else float("nan")
              for key, split in splits.items()}
    expert = expert_file(instances / "human-experts", path)
    if expert is not None:
        # Their greedy.cpp counts the experts' latency whatever the instance's memory and
        # accelerators: so here, on the graph widened to the experts' accelerators.
        fpgas = len(json.loads(expert.read_text())["fpgas"])
        wide = dataclasses.replace(graph, max_accelerators=max(fpgas, graph.max_accelerators))
        split = read_expert_split(expert, wide)
        why = infeasibility(wide, split)
        breaks_rules = fpgas > graph.max_accelerators or why is not None
        if breaks_rules:
            notes.append(f"expert: {fpgas} accelerators" + (f", {why}" if why else ""))
        try:
            values["expert"] = latency(wide, split)
        except PlacementError:
            notes.append("expert: its accelerators feed each other")
        else:
            if breaks_rules:
                values["ip_experts_rules"] = program(
                    solve_latency_program, _experts_rules(wide, split), split, seconds,
                    f"{name} under the experts' rules")[0]
    feasible = [key for key in splits if np.isfinite(values[key])]
    start = splits[min(feasible, key=values.get)] if feasible else None
    ip, info = program(solve_latency_program, graph, start, seconds, name)
    greedy = values["greedy"]
    row = {"instance": name, "greedy": greedy, "dp": values.get("dp", float("nan")),
           "expert": values.get("expert", float("nan")), "ip": ip, "ip_gap": info["gap"],
           "ip_s": info["seconds"],
           "ip_experts_rules": values.get("ip_experts_rules", float("nan"))}
    row.update({f"{key}/greedy": row[key] / greedy for key in ("ip", "dp", "expert")})
    row["ip_experts_rules/expert"] = row["ip_experts_rules"] / row["expert"]
    row["note"] = "; ".join(notes)
    return row


def _experts_rules(wide, split: np.ndarray):
    """The instance under the rules an experts' split keeps where it breaks the instance's:
    its accelerators (`wide` has them) and the memory its fullest accelerator holds."""
    held = accelerator_memory(wide, split).max(initial=0.0)
    return dataclasses.replace(
        wide, memory_per_accelerator=max(wide.memory_per_accelerator, float(held)))


def theirs(binary: str, path: pathlib.Path, timeout: float, memory_gb: float):
    """(seconds, max-load, their split as node id -> device, or why it failed) of their DP."""
    limit = int(memory_gb * 2**30)

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    started = time.perf_counter()
    try:
        with open(path, "rb") as stdin:
            run = subprocess.run([binary], stdin=stdin, capture_output=True, timeout=timeout,
                                 preexec_fn=cap_memory)
    except subprocess.TimeoutExpired:
        return timeout, float("nan"), f"over {timeout:.0f} s"
    took = time.perf_counter() - started
    if run.returncode != 0:
        tail = run.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        return took, float("nan"), f"exit {run.returncode}: {tail[0][:80]}"
    result = json.loads(run.stdout)
    split = {node: d for d, machine in enumerate(result["fpgas"]) for node in machine["nodes"]}
    split.update({node: -1 for machine in result["cpus"] for node in machine["nodes"]})
    return took, float(result["maxLoad"]), split


def recount(graph, split: dict) -> float:
    """Their split's max-load by our accounting (CPU: -1 in `split`)."""
    index = graph.index_of()
    assignment = np.empty(graph.n_nodes, np.int64)
    for node, device in split.items():
        assignment[index[node]] = device if device >= 0 else graph.max_accelerators
    return max_load(graph, assignment)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instances", type=pathlib.Path,
                        help="their folder: throughput-inputs/ and human-experts/")
    parser.add_argument("--their-dp", help="their dp.cpp, compiled (g++ -O3)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of each, in turns")
    parser.add_argument("--only", nargs="+", default=[],
                        help="instances whose path contains one of these")
    parser.add_argument("--skip-theirs", nargs="+", default=[],
                        help="instances not to give their DP (e.g. inceptionv3)")
    parser.add_argument("--their-timeout", type=float, default=900.0)
    parser.add_argument("--their-memory-gb", type=float, default=16.0)
    parser.add_argument("--ip-seconds", type=float, default=60.0,
                        help="time limit of each integer program")
    parser.add_argument("--no-latency", action="store_true",
                        help="leave out the latency instances")
    parser.add_argument("--project", nargs="*", default=list(PROJECT_PLACERS), metavar="NAME",
                        choices=list(METHODS),
                        help="the project's placers whose max-load the second table adds "
                             f"(default {' '.join(PROJECT_PLACERS)}: seconds each; "
                             "hill_climb takes 30 s a graph, placeto minutes on an operator "
                             "graph)")
    args = parser.parse_args(argv)

    paths = _instances(args, "throughput-inputs")
    latency_paths = [] if args.no_latency else _instances(args, "latency-inputs")
    if not paths and not latency_paths:
        parser.error(f"no instances under {args.instances}"
                     + (f" whose path contains {' or '.join(args.only)}" if args.only else ""))
    if paths:
        throughput_tables(args, paths)
    latency_rows = []
    for path in latency_paths:
        latency_rows.append(latency_row(args.instances, path, args.ip_seconds))
        say(f"{latency_rows[-1]['instance']} (latency): program {latency_rows[-1]['ip']:.6g}")
    if latency_rows:
        print()
        print_table(pd.DataFrame(latency_rows).round({"ip_s": 1, "ip_gap": 4}))
    return 0


def _instances(args, kind: str) -> list:
    """The instances of one kind (their folder's throughput-inputs/ or latency-inputs/) that
    `--only` keeps (its names are matched against the whole path, so `--only latency-inputs`
    keeps the latency instances alone)."""
    paths = sorted((args.instances / kind).glob("*/*.json"))
    return [p for p in paths if not args.only or any(s in str(p) for s in args.only)]


def throughput_tables(args, paths: list) -> None:
    """The DP against theirs, then the program and the baselines against the DP."""
    smallest = min(paths, key=lambda p: p.stat().st_size)
    warm_up = time.perf_counter()
    solve_max_load(read_cost_graph(smallest))
    say(f"numba's code loaded in {time.perf_counter() - warm_up:.1f} s")
    rows, versus = [], []
    for path in paths:
        name = f"{path.parent.name}/{path.stem}"
        graph = read_cost_graph(path)
        run_theirs = args.their_dp and not any(s in str(path) for s in args.skip_theirs)
        our_times, their_times = [], []
        their_load, their_note = float("nan"), ""
        for repeat in range(args.repeats):
            order = ("ours", "theirs") if repeat % 2 == 0 else ("theirs", "ours")
            for who in order:
                if who == "ours":
                    took, load, split, info = ours(path, name)
                    our_times.append(took)
                elif run_theirs:
                    took, their_load, their_split = theirs(
                        args.their_dp, path, args.their_timeout, args.their_memory_gb)
                    if isinstance(their_split, str):
                        their_note = f"theirs failed after {took:.0f} s: {their_split}"
                        run_theirs = False          # a failure is not retried
                        continue
                    their_times.append(took)
                    recounted = recount(graph, their_split)
                    if abs(recounted - their_load) > 1e-6 * their_load:
                        their_note = f"their split recounts to {recounted:.6g}"
            say(f"{name}: ours {our_times[-1]:.2f} s"
                + (f", theirs {their_times[-1]:.2f} s" if their_times else ""))
        expert = expert_file(args.instances / "human-experts", path)
        our_s = statistics.median(our_times)
        their_s = statistics.median(their_times) if their_times else float("nan")
        rows.append({
            "instance": name, "nodes": graph.n_nodes, "blocks": info["blocks"],
            "ideals": info["ideals"], "pairs": info["pairs"], "ours": load, "ours_s": our_s,
            "theirs": their_load, "theirs_s": their_s, "ours/theirs": our_s / their_s,
            "same": bool(abs(load - their_load) <= 1e-6 * load) if their_times else None,
            "expert": max_load(graph, read_expert_split(expert, graph)) if expert else None,
            "note": their_note})
        versus.append(against_dp(graph, path, name, load, split, args.ip_seconds,
                                 args.project))
        say(f"{name}: program {versus[-1]['ip']:.6g} (gap {versus[-1]['ip_gap']:.2%})")
    print_table(pd.DataFrame(rows).round({"ours_s": 3, "theirs_s": 3, "ours/theirs": 3}))
    print()
    print_table(pd.DataFrame(versus).round({"ip_s": 1, "ip_gap": 4}))


def print_table(table: pd.DataFrame) -> None:
    with pd.option_context("display.width", 250, "display.max_columns", None,
                           "display.max_colwidth", 80):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))


if __name__ == "__main__":
    sys.exit(main())
