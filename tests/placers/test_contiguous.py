"""The contiguous placer of Tarnawski et al.: their accounting by hand, and the DP, the integer
programs and the baselines against brute force over every split of small instances built
here."""

import dataclasses
import itertools
import threading
import time

import numpy as np
import pytest

from tf_placeto.errors import PlacementError
from tf_placeto.graph.cost_graph import parse_cost_graph
from tf_placeto.placers.contiguous.accounting import (device_loads, infeasibility, latency,
                                                      max_load)
from tf_placeto.placers.contiguous.balance import rebalanced
from tf_placeto.placers.contiguous.baselines import (greedy_latency, local_search,
                                                     one_accelerator, pipedream)
from tf_placeto.placers.contiguous.dp import solve_max_load, solve_max_load_per_accelerators
from tf_placeto.placers.contiguous.ideals import TooManyIdeals, contract, enumerate_ideals
from tf_placeto.placers.contiguous import program
from tf_placeto.placers.contiguous.program import (solve_latency_program,
                                                   solve_max_load_program)


def _graph(nodes, edges, costs, accelerators=2, cpus=1, memory=100.0):
    """nodes: (cpu time, accelerator time, size, supported, colour class, backward)."""
    return parse_cost_graph({
        "maxSizePerFPGA": memory, "maxFPGAs": accelerators, "maxCPUs": cpus,
        "nodes": [{"id": i, "cpuLatency": c, "fpgaLatency": f, "size": s, "supportedOnFpga": ok,
                   "colorClass": cc, "isBackwardNode": back}
                  for i, (c, f, s, ok, cc, back) in enumerate(nodes)],
        "edges": [{"sourceId": u, "destId": v, "cost": costs[u]} for u, v in edges]})


def _random_nodes(rng, n):
    """n nodes of random times and sizes, each in its own colour class, some CPU-only."""
    return [(float(rng.uniform(2, 10)), float(rng.uniform(0.5, 3)), int(rng.integers(1, 4)),
             bool(rng.random() > 0.15), i, 0) for i in range(n)]


def _random_graph(rng, nodes, density, **rules):
    """`nodes` joined by random edges u -> v (u < v, each drawn with probability `density`),
    with random output costs; under `rules` (_graph's), its memory drawn last unless given."""
    n = len(nodes)
    edges = sorted({(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < density})
    costs = _random_costs(rng, n)
    if "memory" not in rules:
        rules["memory"] = float(rng.integers(4, 10))
    return _graph(nodes, edges, costs, **rules)


def _stopped() -> threading.Event:
    """A stop already asked for."""
    stopped = threading.Event()
    stopped.set()
    return stopped


def _random_costs(rng, n):
    return {u: float(rng.uniform(0, 1.5)) for u in range(n)}


def _fork():
    """a -> b, a -> c: a costs 0.5 to move."""
    nodes = [(10, 1, 0, 1, 0, 0), (20, 2, 0, 1, 1, 0), (4, 3, 0, 1, 2, 0)]
    return _graph(nodes, [(0, 1), (0, 2)], {0: 0.5})


def _branchy(memory=9.0):
    """Eight nodes: a branch (1 -> 2 and 1 -> 3 -> 4, joined at 5), node 4 only on a CPU,
    nodes 2 and 6 in one colour class (so 5, between them, goes with them when contiguous),
    and a memory cap that binds at 9 (the sizes sum to 17)."""
    nodes = [(2, .5, 1, 1, 0, 0), (10, 2, 3, 1, 1, 0), (12, 3, 3, 1, 2, 0),
             (8, 2.5, 2, 1, 3, 0), (4, .4, 1, 0, 4, 0), (9, 2, 4, 1, 5, 0),
             (6, 1.5, 2, 1, 2, 0), (1, .2, 1, 1, 7, 0)]
    costs = {0: .3, 1: .6, 2: .5, 3: .4, 4: .2, 5: .7, 6: .3}
    edges = [(0, 1), (1, 2), (1, 3), (3, 4), (2, 5), (4, 5), (5, 6), (6, 7)]
    return _graph(nodes, edges, costs, memory=memory)


def _training(memory):
    """A training step: an input without work (node 0, 1 byte), forward 1 -> 2 -> 3, backward
    6 -> 5 -> 4, each backward node in its forward node's class, activations kept for it."""
    nodes = [(0, 0, 1, 1, 0, 0), (6, 1, 2, 1, 1, 0), (8, 2, 3, 1, 2, 0), (4, 1, 1, 1, 3, 0),
             (12, 2, 2, 1, 1, 1), (16, 4, 3, 1, 2, 1), (8, 2, 1, 1, 3, 1)]
    costs = {0: .4, 1: .5, 2: .3, 3: .2, 6: .6, 5: .7}
    edges = [(0, 1), (1, 2), (2, 3), (3, 6), (6, 5), (5, 4), (1, 4), (2, 5)]
    return _graph(nodes, edges, costs, memory=memory)


def _chained(graph, assignment) -> bool:
    """Whether the devices can be ordered so that each prefix holds a downward-closed set of
    the forward nodes: no cycle among devices along the forward edges."""
    forward = ~graph.is_backward[graph.edge_src] & ~graph.is_backward[graph.edge_dst]
    arcs = {(assignment[u], assignment[v]) for u, v in
            zip(graph.edge_src[forward], graph.edge_dst[forward]) if assignment[u] != assignment[v]}
    devices = set(assignment.tolist())
    while devices:
        sources = {d for d in devices if not any(y == d and x in devices for x, y in arcs)}
        if not sources:
            return False
        devices -= sources
    return True


def _brute_force(graph):
    """(best max-load of any feasible split, of any feasible contiguous split)."""
    best_any = best_contiguous = np.inf
    for devices in itertools.product(range(graph.n_devices), repeat=graph.n_nodes):
        assignment = np.array(devices)
        if infeasibility(graph, assignment) is None:
            load = max_load(graph, assignment)
            best_any = min(best_any, load)
            if _chained(graph, assignment):
                best_contiguous = min(best_contiguous, load)
    return best_any, best_contiguous


def test_loads_as_counted_by_hand():
    graph = _fork()
    # a on accelerator 0, b on accelerator 1, c on the CPU: a's output leaves once (0.5) and
    # enters accelerator 1 (0.5); the CPU pays no communication.
    assert device_loads(graph, [0, 1, 2]).tolist() == [1.5, 2.5, 4.0]
    assert max_load(graph, [0, 1, 2]) == 4.0
    assert device_loads(graph, [0, 0, 1]).tolist() == [3.5, 3.5, 0.0]
    assert device_loads(graph, [2, 2, 2]).tolist() == [0.0, 0.0, 34.0]
    assert device_loads(graph, [2, 0, 0]).tolist() == [5.5, 0.0, 10.0]


def test_latency_runs_each_accelerator_as_one_call():
    graph = _fork()
    # accelerator 0 finishes at 1.5; accelerator 1 starts then and lasts 2.5; c on the CPU
    # starts at 1.5 and lasts 4.
    assert latency(graph, [0, 1, 2]) == 5.5
    assert latency(graph, [2, 2, 2]) == 30.0
    chain = _graph([(1, 1, 0, 1, i, 0) for i in range(3)], [(0, 1), (1, 2)], {0: 1, 1: 1})
    with pytest.raises(PlacementError, match="cycle"):
        latency(chain, [0, 1, 0])


def test_infeasibility_names_the_broken_rule():
    graph = _branchy()
    ok = np.array([2, 0, 1, 0, 2, 1, 1, 2])
    assert infeasibility(graph, ok) is None
    assert "holds 11 bytes, over its 9" in infeasibility(graph, np.array([0, 0, 0, 0, 2, 1, 0, 2]))
    assert "node 4 cannot run" in infeasibility(graph, np.array([2, 0, 1, 0, 0, 1, 1, 2]))
    assert "colour class" in infeasibility(graph, np.array([2, 0, 1, 0, 2, 1, 0, 2]))
    with pytest.raises(PlacementError, match="devices run from 0 to 2"):
        max_load(graph, [0, 1, 2, 3, 0, 0, 0, 0])


@pytest.mark.parametrize("memory", [9.0, 100.0])
def test_the_dp_finds_the_best_contiguous_split(memory):
    graph = _branchy(memory)
    best_any, best_contiguous = _brute_force(graph)
    load, assignment, info = solve_max_load(graph)
    assert load == pytest.approx(best_contiguous, rel=1e-12)
    assert max_load(graph, assignment) == pytest.approx(load, rel=1e-12)
    assert infeasibility(graph, assignment) is None and _chained(graph, assignment)
    assert info["upper_bound"] >= load
    if memory == 9.0:
        # The cap binds (everything fits at 100: 7.5), and a split that is not contiguous
        # does better under it: the rule costs here.
        assert load == pytest.approx(24.0) and best_any == pytest.approx(7.6)
    else:
        assert load == pytest.approx(7.5)


@pytest.mark.parametrize("memory", [5.0, 6.0, 100.0])
def test_backward_nodes_follow_their_class(memory):
    graph = _training(memory)
    _, best_contiguous = _brute_force(graph)
    load, assignment, _ = solve_max_load(graph)
    assert load == pytest.approx(best_contiguous, rel=1e-12)
    assert infeasibility(graph, assignment) is None and _chained(graph, assignment)


def test_an_input_without_work_joins_its_reader_only_where_memory_allows():
    assert contract(_training(100.0)).n_blocks == 3
    assert contract(_training(5.0)).n_blocks == 4


def test_an_input_that_holds_memory_keeps_its_own_device():
    # dp.cpp joins node 0 (no work, 6 bytes) to node 1 (6 bytes); together they overflow an
    # accelerator (7), so it puts both on the CPU: 50. Apart, the best split costs 7.
    nodes = [(0, 0, 6, 1, 0, 0), (50, 5, 6, 1, 1, 0), (50, 5, 1, 1, 2, 0)]
    graph = _graph(nodes, [(0, 1), (1, 2)], {0: 1.0, 1: 1.0}, accelerators=3, memory=7.0)
    load, assignment, _ = solve_max_load(graph)
    assert load == pytest.approx(7.0) == _brute_force(graph)[1]
    assert assignment[0] != assignment[1]


@pytest.mark.parametrize("seed", range(6))
def test_the_dp_agrees_with_brute_force_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n = 6
    nodes = _random_nodes(rng, n)
    mate = int(rng.integers(1, n))
    nodes[mate] = (*nodes[mate][:4], 0, 0)                      # in node 0's colour class
    graph = _random_graph(rng, nodes, 0.4)
    load, assignment, _ = solve_max_load(graph)
    _, best_contiguous = _brute_force(graph)
    assert load == pytest.approx(best_contiguous, rel=1e-12)
    if np.isfinite(load):
        assert infeasibility(graph, assignment) is None and _chained(graph, assignment)


def test_no_split_without_a_device_for_an_unsupported_node():
    nodes = [(1, 1, 0, 1, 0, 0), (1, 1, 0, 0, 1, 0)]
    load, assignment, _ = solve_max_load(_graph(nodes, [(0, 1)], {0: 1}, cpus=0))
    assert load == np.inf and assignment is None


def test_too_wide_a_graph_is_refused_with_a_reason():
    nodes = [(1, 1, 0, 1, i, 0) for i in range(12)]             # 2^12 ideals
    blocks = contract(_graph(nodes, [], {}))
    assert len(enumerate_ideals(blocks)) == 4096
    with pytest.raises(TooManyIdeals, match="more than 1,000 ideals"):
        enumerate_ideals(blocks, max_ideals=1000)


def test_progress_reaches_every_ideal():
    seen = []
    solve_max_load(_branchy(), progress=lambda done, total: seen.append((done, total)))
    total = seen[-1][1]
    assert seen[-1] == (total, total) and total > 1
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def _inference(memory=100.0):
    """Seven forward nodes, two branches joined at node 5, node 3 only on a CPU."""
    nodes = [(4, 1, 2, 1, 0, 0), (12, 3, 3, 1, 1, 0), (10, 2.5, 2, 1, 2, 0),
             (3, .8, 1, 0, 3, 0), (9, 2, 3, 1, 4, 0), (7, 1.5, 2, 1, 5, 0), (2, .5, 1, 1, 6, 0)]
    costs = {0: .4, 1: .6, 2: .3, 3: .2, 4: .5, 5: .3}
    edges = [(0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 5), (5, 6)]
    return _graph(nodes, edges, costs, memory=memory)


@pytest.mark.parametrize("make", [lambda: _branchy(9.0), lambda: _branchy(100.0),
                                  lambda: _training(5.0), lambda: _training(100.0)])
def test_the_program_finds_the_best_split(make):
    graph = make()
    best_any, _ = _brute_force(graph)
    dp_load, dp_assignment, _ = solve_max_load(graph)
    load, assignment, info = solve_max_load_program(graph, start=dp_assignment)
    assert load == pytest.approx(best_any, rel=1e-9) and load <= dp_load + 1e-12
    assert infeasibility(graph, assignment) is None
    assert max_load(graph, assignment) == pytest.approx(load, rel=1e-12)
    assert info["status"] == "optimal" and info["gap"] <= 1e-4
    assert info["bound"] <= load and info["bound"] == pytest.approx(load, rel=1e-4)
    cold, _, _ = solve_max_load_program(graph)             # no start: the same optimum
    assert cold == pytest.approx(best_any, rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_the_program_agrees_with_brute_force_on_random_graphs(seed):
    rng = np.random.default_rng(seed)
    n = 6
    nodes = _random_nodes(rng, n)
    graph = _random_graph(rng, nodes, 0.4)
    best_any, _ = _brute_force(graph)
    load, assignment, info = solve_max_load_program(graph)
    assert load == pytest.approx(best_any, rel=1e-9)
    if np.isfinite(load):
        assert infeasibility(graph, assignment) is None
    else:
        assert assignment is None and info["status"] == "infeasible"


def test_the_two_runs_report_as_one_search_and_stop_together():
    """The bisection and the whole run beside it (program.py) show one incumbent that never
    rises and one bound that never falls; once the bisection proves the optimum, the whole run
    is stopped rather than waited for."""
    rng = np.random.default_rng(7)
    n = 60
    nodes = [(float(rng.uniform(5, 20)), float(rng.uniform(0.5, 2)), 1, True, i, 0)
             for i in range(n)]
    edges = [(u, u + 1) for u in range(n - 1)] + [(u, u + 3) for u in range(0, n - 3, 4)]
    costs = {u: float(rng.uniform(0, 0.2)) for u in range(n)}
    graph = _graph(nodes, edges, costs, accelerators=4, memory=1e9)
    _, start, _ = solve_max_load(graph)
    seen = []
    load, _, info = solve_max_load_program(graph, start=start, time_limit_s=3.0,
                                           progress=lambda *pair: seen.append(pair))
    incumbents, bounds = np.array(seen).T
    assert np.all(np.diff(incumbents) <= 0) and np.all(np.diff(bounds) >= 0)
    assert np.all(bounds <= incumbents + 1e-9) and load <= incumbents[-1] + 1e-9
    assert info["bound"] <= load
    _, start, _ = solve_max_load(_branchy(9.0))
    _, _, info = solve_max_load_program(_branchy(9.0), start=start, time_limit_s=60.0)
    assert info["status"] == "optimal" and info["seconds"] < 20.0


def test_re_splitting_pairs_of_devices_improves_a_poor_split_within_the_rules():
    graph = _branchy(9.0)
    splits = [np.array(devices) for devices in
              itertools.product(range(graph.n_devices), repeat=graph.n_nodes)]
    feasible = [split for split in splits if infeasibility(graph, split) is None]
    worst = max(feasible, key=lambda split: max_load(graph, split))
    best = min(max_load(graph, split) for split in feasible)
    classes = program._Classes(graph, graph.n_devices)
    better = program._resplit_pairs(graph, classes, worst, threading.Event(),
                                    time.perf_counter() + 30.0)
    assert infeasibility(graph, better) is None
    assert best <= max_load(graph, better) < max_load(graph, worst)
    assert np.array_equal(program._resplit_pairs(graph, classes, worst, _stopped(),
                                                 time.perf_counter() + 30.0), worst)


def _no_move_lowers(graph, split, value=max_load) -> bool:
    """Whether no move of one colour class to another device it may take lowers `value`
    (counted from scratch; a split without a latency does not count)."""
    load = value(graph, split)
    for c in np.unique(graph.color_class):
        for device in range(graph.n_devices):
            moved = np.where(graph.color_class == c, device, split)
            try:
                if infeasibility(graph, moved) is None and value(graph, moved) < load - 1e-9:
                    return False
            except PlacementError:
                pass
    return True


@pytest.mark.parametrize("seed", range(8))
def test_the_local_search_ends_where_no_move_helps_within_the_rules(seed):
    """balance.py prices moves and swaps by the nodes they touch; counted from scratch, its
    first descent (stopped before any kick) and its answer keep every rule and no single move
    lowers their max-load, and each better split it offers is better than the last."""
    rng = np.random.default_rng(seed)
    n = 12
    nodes = _random_nodes(rng, n)
    for mate in rng.integers(1, n, 3):
        nodes[mate] = (*nodes[mate][:4], int(rng.integers(0, mate)), 0)
    graph = _random_graph(rng, nodes, 0.3, accelerators=3, memory=12.0)
    start = np.full(graph.n_nodes, graph.max_accelerators)         # all on the CPU
    descended = rebalanced(graph, start, time.perf_counter() + 10.0, stop=_stopped())
    offered = []
    split = rebalanced(graph, start, time.perf_counter() + 10.0, found=offered.append)
    for answer in (descended, split):
        assert infeasibility(graph, answer) is None and _no_move_lowers(graph, answer)
    loads = [max_load(graph, offered_split) for offered_split in offered]
    assert loads == sorted(loads, reverse=True) and loads[-1] == max_load(graph, split)
    assert max_load(graph, split) <= max_load(graph, descended) < max_load(graph, start)


@pytest.mark.parametrize("seed", range(6))
def test_the_local_search_under_latency_ends_where_no_move_helps(seed):
    rng = np.random.default_rng(seed)
    n = 10
    nodes = _random_nodes(rng, n)
    graph = _random_graph(rng, nodes, 0.3, accelerators=3, memory=12.0)
    start = greedy_latency(graph)[1]
    for stop in (_stopped(), None):
        split = rebalanced(graph, start, time.perf_counter() + 10.0, stop=stop,
                           objective="latency")
        assert infeasibility(graph, split) is None and _no_move_lowers(graph, split, latency)
        assert latency(graph, split) <= latency(graph, start)


def test_the_local_search_improves_the_worst_split_and_stops_when_told():
    graph = _branchy(9.0)
    splits = [np.array(devices) for devices in
              itertools.product(range(graph.n_devices), repeat=graph.n_nodes)]
    worst = max((split for split in splits if infeasibility(graph, split) is None),
                key=lambda split: max_load(graph, split))
    better = rebalanced(graph, worst, time.perf_counter() + 10.0)
    assert infeasibility(graph, better) is None and _no_move_lowers(graph, better)
    assert max_load(graph, better) < max_load(graph, worst)
    # stopped, it still makes its first descent (a local optimum), and no kicks after it
    descended = rebalanced(graph, worst, time.perf_counter() + 10.0, stop=_stopped())
    assert _no_move_lowers(graph, descended)
    assert max_load(graph, better) <= max_load(graph, descended) < max_load(graph, worst)
    with pytest.raises(PlacementError, match="breaks a rule"):
        rebalanced(graph, np.zeros(graph.n_nodes, np.int64), time.perf_counter() + 1.0)


def test_the_program_never_ends_worse_than_its_start():
    graph = _branchy(9.0)
    _, start, _ = solve_max_load(graph)
    seen = []
    load, _, info = solve_max_load_program(graph, start=start, time_limit_s=0.0,
                                           progress=lambda *pair: seen.append(pair))
    assert load <= max_load(graph, start) and info["bound"] <= load
    with pytest.raises(PlacementError, match="not a split"):
        solve_max_load_program(graph, start=np.zeros(graph.n_nodes, np.int64))


@pytest.mark.parametrize("memory", [5.0, 100.0])
def test_the_latency_program_finds_the_best_split(memory):
    graph = _inference(memory)
    k = graph.max_accelerators
    best = np.inf
    for devices in itertools.product(range(k + 1), repeat=graph.n_nodes):
        assignment = np.array(devices)
        if infeasibility(graph, assignment) is None:
            try:
                best = min(best, latency(graph, assignment))
            except PlacementError:          # accelerators that feed each other
                pass
    value, assignment, info = solve_latency_program(graph)
    assert value == pytest.approx(best, rel=1e-9) and info["status"] == "optimal"
    assert latency(graph, assignment) == pytest.approx(value, rel=1e-12)
    greedy, start = greedy_latency(graph)
    assert greedy >= value - 1e-9 and latency(graph, start) == pytest.approx(greedy)
    warm, _, _ = solve_latency_program(graph, start=start)
    assert warm == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("make", [lambda: _branchy(9.0), lambda: _branchy(100.0),
                                  lambda: _training(6.0), _fork, _inference])
def test_the_baselines_give_splits_they_count_right(make):
    graph = make()
    best_any, best_contiguous = _brute_force(graph)
    for name, (load, assignment) in {"one": one_accelerator(graph),
                                     "local": local_search(graph, seed=1),
                                     "pipedream": pipedream(graph)}.items():
        if assignment is None:
            assert load == np.inf, name
            continue
        assert infeasibility(graph, assignment) is None, name
        assert max_load(graph, assignment) == pytest.approx(load, rel=1e-12), name
        assert load >= (best_contiguous if name == "pipedream" else best_any) - 1e-9, name


def test_one_accelerator_leaves_the_cpu_only_nodes_on_the_cpu():
    load, assignment = one_accelerator(_branchy(100.0))
    assert assignment.tolist() == [0, 0, 0, 0, 2, 0, 0, 0] and load == pytest.approx(12.3)
    assert one_accelerator(_branchy(9.0)) == (np.inf, None)      # 16 bytes over 9


def test_pipedream_keeps_each_biconnected_component_on_one_device():
    # a diamond 0 -> {1, 2} -> 3, then 3 -> 4: the diamond's edges leave 0, 1 and 2, which
    # must share a device; the bridge 3 -> 4 may be cut
    nodes = [(10, 2, 0, 1, i, 0) for i in range(5)]
    graph = _graph(nodes, [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)], {i: .1 for i in range(4)},
                   accelerators=5)
    load, assignment = pipedream(graph)
    assert len({*assignment[:3].tolist()}) == 1
    assert load == pytest.approx(max_load(graph, assignment)) and load < 10.0


@pytest.mark.parametrize("seed", range(3))
def test_pipedream_is_the_dp_on_a_chain(seed):
    rng = np.random.default_rng(seed)
    n = 7
    nodes = _random_nodes(rng, n)
    costs = _random_costs(rng, n)
    graph = _graph(nodes, [(i, i + 1) for i in range(n - 1)], costs, accelerators=3,
                   memory=float(rng.integers(5, 10)))
    assert pipedream(graph)[0] == pytest.approx(solve_max_load(graph)[0], rel=1e-12)


@pytest.mark.parametrize("memory", [9.0, 100.0])
def test_one_table_holds_the_best_split_for_every_number_of_accelerators(memory):
    graph = dataclasses.replace(_branchy(memory), max_accelerators=3)
    splits, _ = solve_max_load_per_accelerators(graph, slack=1e9)
    assert len(splits) == 4
    for count, (load, assignment) in enumerate(splits):
        alone, _, _ = solve_max_load(dataclasses.replace(graph, max_accelerators=count))
        assert load == pytest.approx(alone, rel=1e-12)
        if assignment is not None:
            assert max_load(graph, assignment) == pytest.approx(load, rel=1e-12)
            assert assignment[assignment < graph.max_accelerators].max(initial=-1) < count
    # without slack, a count is exact where its best is within the DP's bound, else unread
    tight, info = solve_max_load_per_accelerators(graph, slack=0.0)
    for (load, _), (exact, _) in zip(tight, splits):
        if exact <= info["upper_bound"]:
            assert load == pytest.approx(exact, rel=1e-12)
        else:
            assert load == np.inf
    assert tight[-1][0] == pytest.approx(splits[-1][0], rel=1e-12)
