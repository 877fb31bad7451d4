"""A cost graph as a SOURCE: ops that carry their own costs, placed under Tarnawski et al.'s
accounting (NeurIPS 2020; their JSON format, tf_placeto/graph/cost_graph.py).

Nothing is run: every figure is computed from the file. Under the throughput objective a split
costs its max-load, the busiest device's time per sample of a pipeline; under the latency
objective, one sample's latency, each accelerator running its part as one call
(tf_placeto/placers/contiguous/accounting.py). The same lets a user bring a cost graph profiled
in another framework. Their methods and baselines split it, and so do the project's placers,
on the graph as a PlacementProblem (placers/contiguous/as_problem.py), judged by the same
accounting.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from tf_placeto import methods as project_methods
from tf_placeto.errors import InputError, PlacementError, SourceError
from tf_placeto.files import write_atomically
from tf_placeto.graph.cost_graph import (CostGraph, device_names, expert_file,
                                         is_cost_graph_file, node_names, read_cost_graph,
                                         read_expert_split)
from tf_placeto.placers.contiguous import baselines
from tf_placeto.placers.contiguous.accounting import device_loads, infeasibility, latency
from tf_placeto.placers.contiguous.as_problem import placement_problem
from tf_placeto.placers.contiguous.dp import solve_max_load, with_progress_bar
from tf_placeto.placers.contiguous.ideals import MAX_IDEALS
from tf_placeto.placers.contiguous.program import (solve_latency_program,
                                                   solve_max_load_program)
from tf_placeto.rewrite import check_placement_path

THROUGHPUT, LATENCY = "throughput", "latency"
DP, OPTIMAL = "dp", "optimal"
EXPERTS = "experts"        # compare's row of their experts' split (not a method)
OPTIMAL_TIME_LIMIT_S = 60.0


@dataclasses.dataclass(frozen=True)
class Request:
    """What a split is asked for: the objective, the integer programs' time limit, and the
    seed and options (surface names: budget, policy, start) of the project's placers."""

    objective: str = THROUGHPUT
    time_limit_s: float = OPTIMAL_TIME_LIMIT_S
    seed: int = 0
    options: Optional[dict] = None


@dataclasses.dataclass(frozen=True)
class CostGraphMethod:
    """A way to split a cost graph: decide(graph, request) -> (assignment or None when
    nothing fits, info); `objectives` are those it optimises (the others only score its
    split); compare tries it by default unless `opt_in`."""

    name: str
    objectives: tuple
    decide: Callable
    help: str
    opt_in: bool = False


def _dp(graph: CostGraph, request: Request) -> tuple:
    max_ideals = (request.options or {}).get("max_ideals") or MAX_IDEALS
    _, assignment, info = with_progress_bar(solve_max_load, graph, max_ideals=max_ideals)
    return assignment, info


def _optimal(graph: CostGraph, request: Request) -> tuple:
    """Max-load: the program over any split, started from the DP's (never worse than the
    contiguous optimum). Latency: their latency program, started from their greedy."""
    limit = {"time_limit_s": request.time_limit_s}
    if request.objective == LATENCY:
        _, start = baselines.greedy_latency(graph)
        _, assignment, info = solve_latency_program(graph, start=start, **limit)
        return assignment, {**info, **limit}
    start, dp_info = _dp(graph, request)
    _, assignment, info = solve_max_load_program(graph, start=start, **limit)
    return assignment, {**info, **limit, "dp_seconds": dp_info["seconds"]}


def _baseline(function) -> Callable:
    def decide(graph: CostGraph, request: Request) -> tuple:
        _, assignment = function(graph)
        return assignment, {}
    return decide


def _project(name: str) -> Callable:
    """The project's placer `name` on the graph's PlacementProblem (as_problem.py), its
    decision per colour class given to every node of the class. Under throughput the
    problem's stream holds one sample per device, what keeps a pipeline over all of them
    full."""
    def decide(graph: CostGraph, request: Request) -> tuple:
        problem = placement_problem(graph, request.objective, in_flight=graph.n_devices)
        decided = project_methods.decide(name, problem, seed=request.seed,
                                         given=request.options)
        return problem.op_devices(decided.group_devices), decided.info
    return decide


def _project_method(name: str, opt_in: str = "") -> CostGraphMethod:
    """The CostGraphMethod of the project's placer `name`; `opt_in`: why compare leaves it
    out unless --methods names it."""
    spec = project_methods.spec(name)
    follows = ("it minimises the project's simulated step (throughput: its stream of one "
               "sample per device)" if spec.objectives else "it follows neither objective")
    within = f" within {spec.time_limit_s:g} s" if spec.time_limit_s else ""
    return CostGraphMethod(
        name, spec.objectives, _project(name),
        f"the project's placer: {spec.help}; {follows}{within}, scored under their "
        "accounting" + (f"; opt-in (--methods): {opt_in}" if opt_in else ""),
        opt_in=bool(opt_in))


METHODS = {method.name: method for method in (
    CostGraphMethod(DP, (THROUGHPUT,), _dp,
                    "the exact dynamic program over contiguous splits (their dp.cpp)"),
    CostGraphMethod(OPTIMAL, (THROUGHPUT, LATENCY), _optimal,
                    "the integer program over any split, with its proven gap (throughput: "
                    "started from the DP's split; latency: from their greedy)"),
    CostGraphMethod("greedy", (LATENCY,), _baseline(baselines.greedy_latency),
                    "their latency greedy: accelerators filled in topological order"),
    CostGraphMethod("one_accelerator", (), _baseline(baselines.one_accelerator),
                    "everything on one accelerator (unsupported nodes on the CPU)"),
    CostGraphMethod("local_search", (THROUGHPUT,), _baseline(baselines.local_search),
                    "their local search: moves of one node while the max-load falls"),
    CostGraphMethod("pipedream", (THROUGHPUT,), _baseline(baselines.pipedream),
                    "PipeDream's partitioner over a topological order"),
    *(_project_method(name) for name in ("metis", "m_topo", "m_etf", "m_sct", "heft",
                                         "hill_climb")),
    _project_method("placeto", "it loads TensorFlow and its policy walks every colour class "
                               "(minutes on an operator graph of 2,000 nodes, zero-shot)"),
)}


def is_cost_graph(source) -> bool:
    """Whether SOURCE names a cost graph file rather than a TensorFlow graph."""
    return isinstance(source, str) and is_cost_graph_file(source)


@dataclasses.dataclass
class CostGraphResult:
    """One split of a cost graph: both objectives' figures, each device's load per sample."""

    source: str
    method: str
    objective: str
    assignment: Optional[np.ndarray]     # device index per node; None: nothing fits
    devices: list
    nodes: list                          # node_names, in the assignment's order
    decide_s: float
    info: dict
    max_load: Optional[float] = None
    latency: Optional[float] = None
    loads: Optional[np.ndarray] = None
    reason: Optional[str] = None         # why the split breaks a rule (under latency, or
    #                                      has no latency)
    no_latency: Optional[str] = None     # why the split has no latency (calls in a cycle)
    out: Optional[str] = None            # where its placement file was written
    fits: bool = False                   # a split that keeps the instance's rules

    def placement(self) -> dict:
        """{node name: device} (node_names)."""
        return {name: self.devices[d] for name, d in zip(self.nodes, self.assignment)}

    def summary(self) -> dict:
        """A JSON-ready description (what `place --json` prints for a cost graph)."""
        info = {k: v.item() if hasattr(v, "item") else v for k, v in self.info.items()
                if isinstance(v, (int, float, str, bool)) or hasattr(v, "item")}
        loads = None if self.loads is None else {d: float(v) for d, v in
                                                 zip(self.devices, self.loads)}
        return {"source": self.source, "method": self.method, "objective": self.objective,
                "simulated": True, "devices": self.devices, "decide_s": self.decide_s,
                "max_load": self.max_load, "latency": self.latency, "loads": loads,
                "feasible": self.assignment is not None and self.reason is None,
                "reason": self.reason, "no_latency": self.no_latency, "placement": self.out,
                **info}


def score(graph: CostGraph, assignment, source: str = "", method: str = "given",
          objective: str = THROUGHPUT, decide_s: float = 0.0,
          info: Optional[dict] = None) -> CostGraphResult:
    """Both objectives' figures of a split (their accounting), and what rule it breaks."""
    result = CostGraphResult(source, method, objective, assignment, device_names(graph),
                             node_names(graph), decide_s, dict(info or {}))
    if assignment is None:
        result.reason = "no split fits the accelerators' memory"
        return result
    result.loads = device_loads(graph, assignment)
    result.max_load = float(result.loads.max())
    result.reason = infeasibility(graph, assignment)
    result.fits = result.reason is None
    try:
        result.latency = latency(graph, assignment)
    except PlacementError as exc:       # a pipeline's split need not have one
        result.no_latency = str(exc)
        if objective == LATENCY:
            result.reason = result.reason or result.no_latency
    return result


def place(path: str, method: str = DP, objective: str = THROUGHPUT,
          time_limit_s: float = OPTIMAL_TIME_LIMIT_S, out: Optional[str] = None,
          overwrite: bool = False, seed: int = 0,
          options: Optional[dict] = None) -> CostGraphResult:
    """The split `method` finds for the cost graph in `path`, scored under both objectives;
    with `out`, its placement file ({node name: device}) is written there, the path checked
    before any work (`overwrite` replaces only a placement file). `seed` and `options`
    (Request) go to the project's placers."""
    spec = _method(method, objective)
    if spec.objectives and objective not in spec.objectives:
        wanted = "max-load: pass --objective throughput" if spec.objectives == (THROUGHPUT,) \
            else "latency: pass --objective latency"
        raise InputError(f"method {method} minimises the {wanted}")
    if out is not None:
        check_placement_path(out, path, overwrite)
    result = _decided(read_cost_graph(path), path, spec,
                      Request(objective, time_limit_s, seed, options))
    if out is not None and result.assignment is not None:
        result.out = write_placement(result, out)
    return result


def _decided(graph: CostGraph, path: str, spec: CostGraphMethod,
             request: Request) -> CostGraphResult:
    """`spec`'s split, timed and scored (a method that optimises the other objective still
    gives a split, scored under both)."""
    started = time.perf_counter()
    assignment, info = spec.decide(graph, request)
    return score(graph, assignment, path, spec.name, request.objective,
                 time.perf_counter() - started, info)


def experts(graph: CostGraph, path: str, folder: str,
            objective: str = THROUGHPUT) -> Optional[CostGraphResult]:
    """The experts' split of the graph in `path` from their `folder` (human-experts/;
    expert_file says which file), scored as method EXPERTS; None where the folder has none
    for it. A split that does not fit the graph (more accelerators than it has, nodes it
    lacks) is a result without figures, its reason said."""
    found = expert_file(folder, path)
    if found is None:
        return None
    started = time.perf_counter()
    try:
        assignment = read_expert_split(found, graph)
    except SourceError as exc:
        result = score(graph, None, path, EXPERTS, objective)
        result.reason = str(exc)
        return result
    return score(graph, assignment, path, EXPERTS, objective, time.perf_counter() - started,
                 {"split": str(found)})


def show(path: str, placement_file: str) -> CostGraphResult:
    """A split read from a placement file ({node name: device}, as `place --out` writes it)."""
    graph = read_cost_graph(path)
    return score(graph, read_placement(graph, placement_file), path)


def compare(paths: Sequence[str], methods: Optional[Sequence[str]] = None,
            objective: str = THROUGHPUT, time_limit_s: float = OPTIMAL_TIME_LIMIT_S,
            progress: Callable[[str], None] = lambda message: None,
            experts_folder: Optional[str] = None, seed: int = 0,
            options: Optional[dict] = None) -> pd.DataFrame:
    """One row per (cost graph, method): its max-load and latency, and `vs_best`, the
    objective's figure over the best row's of that graph among the splits that keep the
    instance's rules; how long it took to decide.
    Methods: all but the opt-in ones unless named. With `experts_folder` (their
    human-experts/), a row "experts" for each graph that has a split there (experts)."""
    specs = [_method(method, objective) for method in methods or
             [name for name, spec in METHODS.items() if not spec.opt_in]]
    if experts_folder is not None and not os.path.isdir(experts_folder):
        raise InputError(f"--experts {experts_folder}: not a folder (their human-experts/)")
    request = Request(objective, time_limit_s, seed, options)
    rows = []
    for path in paths:
        graph = read_cost_graph(path)
        results = []
        for spec in specs:
            progress(f"{path}: {spec.name}")
            results.append(_decided(graph, path, spec, request))
        if experts_folder is not None:
            results.append(experts(graph, path, experts_folder, objective))
        rows.extend({"graph": path, "method": result.method, "max_load": result.max_load,
                     "latency": result.latency, "decide_s": result.decide_s,
                     "gap": result.info.get("gap"), "reason": result.reason or "",
                     "fits": result.fits}
                    for result in results if result is not None)
    table = pd.DataFrame(rows)
    column = "max_load" if objective == THROUGHPUT else "latency"
    # the best is a split the instance allows: one over an accelerator's memory is no yardstick
    best = table[column].where(table.pop("fits")).groupby(table["graph"]).transform("min")
    table["vs_best"] = table[column] / best
    return table


def summary(path: str) -> dict:
    """What `inspect` says of a cost graph: its size, devices and total work."""
    graph = read_cost_graph(path)
    return {"source": path, "kind": "cost graph", "nodes": graph.n_nodes,
            "edges": int(graph.edge_src.size),
            "colour_classes": int(np.unique(graph.color_class).size),
            "accelerators": graph.max_accelerators, "cpus": graph.max_cpus,
            "memory_per_accelerator": graph.memory_per_accelerator,
            "accelerator_time": float(graph.accel_latency.sum()),
            "cpu_time": float(graph.cpu_latency.sum()),
            "unsupported_nodes": int((~graph.supported).sum()),
            "backward_nodes": int(graph.is_backward.sum())}


def read_placement(graph: CostGraph, path: str) -> np.ndarray:
    """The assignment in a placement file: every node named once (node_names), each on a
    device of the graph (device_names)."""
    try:
        with open(path, encoding="utf-8") as f:
            given = json.load(f)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable placement JSON ({exc})") from exc
    if not isinstance(given, dict):
        raise InputError(f"{path}: a placement is an object of node name -> device")
    names, devices = node_names(graph), device_names(graph)
    index = {device: d for d, device in enumerate(devices)}
    missing = [name for name in names if name not in given]
    unknown = sorted(set(given) - set(names))
    if missing or unknown:
        raise InputError(f"{path}: the placement must name every node once "
                         f"({len(missing)} missing, e.g. {missing[:1]}; {len(unknown)} "
                         f"unknown, e.g. {unknown[:1]})")
    bad = sorted({str(d) for d in given.values() if d not in index})
    if bad:
        raise InputError(f"{path}: devices {bad[:3]} are not among {', '.join(devices)}")
    return np.array([index[given[name]] for name in names], np.int64)


def write_placement(result: CostGraphResult, path: str) -> str:
    """{node name: device}, whole or not at all (files.write_atomically)."""
    return write_atomically(path, lambda f: json.dump(result.placement(), f, indent=1))


def _method(name: str, objective: str) -> CostGraphMethod:
    if objective not in (THROUGHPUT, LATENCY):
        raise InputError(f"objective must be {THROUGHPUT} or {LATENCY}, not {objective!r}")
    if name not in METHODS:
        raise InputError(f"unknown method {name!r} for a cost graph; methods: "
                         f"{', '.join(METHODS)}")
    return METHODS[name]
