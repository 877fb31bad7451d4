"""What several placers share (this module is not a placer itself).

Costs seen the same way by every placer (a group's compute averaged over the devices that can
run it, the bytes between groups in both directions, how soon a group may follow another at op
level), the memory test every placer applies before it puts a group somewhere, `repair`,
which makes a decision obey the kernel rules and, where it can, the memory capacities, moving
the groups whose move cuts the fewest bytes, `memory_repair`, which moves groups until the
simulated peaks fit, the search cost of the placers that search, and the decisions of the fast
placers, which the searching placers start from.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np
import scipy.sparse

from tf_placeto.placers import registry
from tf_placeto.placers.problem import PlacementProblem


def fast_placers() -> tuple:
    """The specs of the placers that decide in about a second or less, without learning or
    solving (PlacerSpec.fast), in report order."""
    return tuple(spec for spec in registry.discover("tf_placeto.placers") if spec.fast)


def fast_decisions(problem: PlacementProblem) -> list:
    """(name, device per group) of each fast placer."""
    return [(spec.name, problem.check(decision_and_info(spec.place(problem))[0]))
            for spec in fast_placers()]


def decision_and_info(decided) -> tuple:
    """(device per group, info) from what a placer module's place() returns: the decision,
    or the decision and its info."""
    return decided if isinstance(decided, tuple) else (decided, {})


def mean_compute_us(problem: PlacementProblem) -> np.ndarray:
    """Per group, its run time averaged over the devices that have kernels for it."""
    allowed = problem.allowed
    total = np.where(allowed, problem.compute_us, 0.0).sum(axis=1)
    return total / np.maximum(allowed.sum(axis=1), 1)


@dataclasses.dataclass
class EdgeTiming:
    """How each forward group edge a -> b (problem.edge_src order) behaves at op level.

    A group edge is usually a few op edges: b's first ops may need only a's early outputs, so
    on another device b can start long before a ends. Scheduling groups with these lags instead
    of "after a finishes" keeps the parallelism of the op graph that contiguous groups hide.
    """

    lag_us: np.ndarray     # least time from a's start to b's start that lets every op of b find
                           # its inputs from a done, both groups running their ops back to back
                           # in topological order (transfers aside); at most a's run time,
                           # negative when what b needs from a comes late in b
    tensors: np.ndarray    # distinct tensors sent: each pays a link's latency (control: none)

    def transfer_us(self, problem: PlacementProblem, edge: int, src: int) -> np.ndarray:
        """Per device, the time to send the edge's data there from device src, with what its
        consumer's ops take more with a remote input (0 to src itself; one latency per tensor:
        the simulator sends them one by one)."""
        elsewhere = np.arange(problem.n_devices) != src
        return (self.tensors[edge] * problem.latency_us[src]
                + problem.edge_bytes[edge] / problem.bytes_per_us[src]
                + np.where(elsewhere, problem.edge_extra_us[edge], 0.0))

    def copy_us(self, problem: PlacementProblem, edge: int, src: int) -> np.ndarray:
        """Per device, the processor time the edge's crossing from device src takes at each
        of its ends (0 to src itself): the fixed copy per tensor and the copy share of its
        bytes, which CPU workers spend serializing and deserializing (simulator's model)."""
        simulation = problem.simulation
        return (self.tensors[edge] * simulation.link_copy_us[src]
                + simulation.link_copy_share[src] * problem.edge_bytes[edge]
                / problem.bytes_per_us[src])

    def mean_transfer_us(self, problem: PlacementProblem) -> np.ndarray:
        """Per edge, the crossing time (transfer and remote extra) averaged over pairs of
        distinct devices."""
        return (problem.mean_transfer_us(problem.edge_bytes) + problem.edge_extra_us
                + (self.tensors - 1) * problem.mean_transfer_us(0.0))


def edge_timing(problem: PlacementProblem) -> EdgeTiming:
    """Lags and tensor counts of the forward edges, from the op graph (op times averaged over
    the devices: exact when the devices are alike)."""
    simulation = problem.simulation
    group_of = problem.groups.group_of
    op_us = (simulation.compute_us[:, simulation.device_type_of].mean(axis=1)
             + simulation.op_overhead_us)
    order = np.asarray(problem.groups.op_graph.topological_order(), np.int64)
    by_group = order[np.argsort(group_of[order], kind="stable")]
    ends = np.cumsum(op_us[by_group])
    first = np.r_[0, np.flatnonzero(np.diff(group_of[by_group])) + 1]
    group_base = np.zeros(problem.n_groups)
    group_base[group_of[by_group[first]]] = ends[first] - op_us[by_group[first]]
    end_offset = np.empty(len(op_us))
    end_offset[by_group] = ends - group_base[group_of[by_group]]
    start_offset = end_offset - op_us

    n_data = len(simulation.edge_consumer)
    producer = np.concatenate([simulation.tensor_producer[simulation.edge_tensor],
                               simulation.control_src])
    consumer = np.concatenate([simulation.edge_consumer, simulation.control_dst])
    a, b = group_of[producer], group_of[consumer]
    forward = np.flatnonzero(a < b)
    edge_key = problem.edge_src * problem.n_groups + problem.edge_dst
    edge = np.searchsorted(edge_key, a[forward] * problem.n_groups + b[forward])
    lag = np.full(len(edge_key), -np.inf)
    np.maximum.at(lag, edge, end_offset[producer[forward]] - start_offset[consumer[forward]])
    is_data = forward < n_data
    sent = np.unique(edge[is_data] * len(simulation.tensor_producer)
                     + simulation.edge_tensor[forward[is_data]])
    tensors = np.bincount(sent // len(simulation.tensor_producer), minlength=len(edge_key))
    return EdgeTiming(lag_us=lag, tensors=tensors.astype(np.float64))


def link_bytes(problem: PlacementProblem) -> scipy.sparse.csr_matrix:
    """Symmetric (n_groups, n_groups) bytes exchanged, forward and feedback edges together:
    what a cut between two groups costs, whichever way the data flows."""
    src = np.concatenate([problem.edge_src, problem.feedback_src, problem.edge_dst,
                          problem.feedback_dst])
    dst = np.concatenate([problem.edge_dst, problem.feedback_dst, problem.edge_src,
                          problem.feedback_src])
    nbytes = np.tile(np.concatenate([problem.edge_bytes, problem.feedback_bytes]), 2)
    n = problem.n_groups
    return scipy.sparse.csr_matrix((nbytes, (src, dst)), shape=(n, n))


def fits(problem: PlacementProblem, groups, load: np.ndarray) -> np.ndarray:
    """(len(groups), n_devices) bool: a kernel exists and the group's modelled memory still
    fits beside `load`."""
    groups = np.atleast_1d(groups)
    room = problem.capacity_bytes - load
    return problem.allowed[groups] & (problem.memory_bytes[groups, None] <= room[None, :])


def roomiest_device(problem: PlacementProblem, group: int, load: np.ndarray) -> int:
    """The allowed device with the most memory left: the best effort when nothing fits."""
    room = np.where(problem.allowed[group], problem.capacity_bytes - load, -np.inf)
    return int(np.argmax(room))


def repair(problem: PlacementProblem, group_devices) -> tuple:
    """(decision, groups moved): kernel rules obeyed, memory within capacity where possible.

    A group on a device without its kernel moves first; then, while a device is over its
    capacity, one of its groups moves to a device where it fits, the move that keeps the most
    bytes local (the cut grows least) first. Moves only ever go to devices with room, so each
    group moves at most once and the loop ends; when no group can move, the rest stays over.
    """
    devices = np.array(group_devices, dtype=np.int64)
    links = link_bytes(problem)
    load = problem.device_loads(devices)
    moved = 0
    homeless = np.flatnonzero(~problem.allowed[np.arange(problem.n_groups), devices])
    for g in homeless:
        load[devices[g]] -= problem.memory_bytes[g]
        gain = _local_bytes(problem, links, [g], devices, load)[0]
        target = int(np.argmax(gain)) if np.isfinite(gain).any() \
            else roomiest_device(problem, g, load)
        devices[g] = target
        load[target] += problem.memory_bytes[g]
        moved += 1
    while True:
        over = int(np.argmax(load - problem.capacity_bytes))
        if load[over] <= problem.capacity_bytes[over]:
            break
        movable = np.flatnonzero((devices == over) & (problem.memory_bytes > 0))
        gain = _local_bytes(problem, links, movable, devices, load)
        gain[:, over] = -np.inf
        if not np.isfinite(gain).any():
            break
        row, target = np.unravel_index(np.argmax(gain), gain.shape)
        g = movable[row]
        devices[g] = target
        load[over] -= problem.memory_bytes[g]
        load[target] += problem.memory_bytes[g]
        moved += 1
    return devices, moved


# Simulations `memory_repair` may spend: a few hundred milliseconds on Inception-V3.
MEMORY_REPAIR_EVALUATIONS = 200


def memory_repair(problem: PlacementProblem, group_devices) -> Optional[tuple]:
    """(decision, groups moved): the decision with single groups moved off the devices whose
    simulated peak passes their capacity, for when the modelled memory misjudged it; None
    when no fitting decision was found.

    Each move is the one, among moves of a group off an overflowing device (largest modelled
    memory first), that lowers the simulated excess most, then the step time; it stops when
    everything fits, no move lowers the excess, or MEMORY_REPAIR_EVALUATIONS simulations are
    spent.
    """
    devices = problem.check(group_devices).copy()
    result = problem.simulate(devices)
    best = (result.memory_excess_bytes, result.step_time_us)
    evaluations, moved = 1, 0
    by_memory = np.argsort(-problem.memory_bytes, kind="stable")
    while best[0] > 0 and evaluations < MEMORY_REPAIR_EVALUATIONS:
        over = result.peak_memory_bytes > problem.capacity_bytes
        moves = [(g, d) for g in by_memory[over[devices[by_memory]]]
                 for d in np.flatnonzero(problem.allowed[g]) if d != devices[g]]
        chosen = None
        for g, d in moves[:MEMORY_REPAIR_EVALUATIONS - evaluations]:
            trial = devices.copy()
            trial[g] = d
            trial_result = problem.simulate(trial)
            evaluations += 1
            score = (trial_result.memory_excess_bytes, trial_result.step_time_us)
            if score < best:
                best, chosen, candidate = score, (g, d), trial_result
        if chosen is None:
            break
        devices[chosen[0]] = chosen[1]
        result = candidate
        moved += 1
    return (devices, moved) if best[0] == 0 else None


def _local_bytes(problem, links, groups, devices, load) -> np.ndarray:
    """(len(groups), n_devices): bytes each group exchanges with the groups on each device,
    -inf where the group may not go (no kernel, no room)."""
    on_device = scipy.sparse.csr_matrix(
        (np.ones(problem.n_groups), (np.arange(problem.n_groups), devices)),
        shape=(problem.n_groups, problem.n_devices))
    local = np.asarray((links[groups] @ on_device).todense(), dtype=np.float64)
    return np.where(fits(problem, groups, load), local, -np.inf)


def evaluations_to_within(objectives, tolerance: float = 0.05,
                          reference: Optional[float] = None) -> Optional[int]:
    """How many placements a search evaluated (objectives in evaluation order) until its best
    so far first came within `tolerance` of its final best (or of `reference`, another
    search's final best): what a learned placer paid for most of its result, comparable
    across placers whatever their budgets. 0: none evaluated; None: `reference` never met."""
    objectives = np.asarray(objectives, dtype=np.float64)
    if objectives.size == 0:
        return 0
    close = objectives <= (objectives.min() if reference is None else reference) * (1 + tolerance)
    return int(np.argmax(close)) + 1 if close.any() else None
