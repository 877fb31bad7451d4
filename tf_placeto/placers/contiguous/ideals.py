"""The blocks a contiguous split moves whole, and the ideals (downward-closed sets) of their
DAG, as bitsets.

Blocks follow Tarnawski et al.'s dp.cpp: a colour class goes to one device, so each class is
one block; a backward node follows the forward nodes of its class, so the DAG is that of the
forward nodes; a class with backward nodes only takes its place from the mirror image of its
backward edges; classes that the forward edges join into a cycle fuse (a downward-closed set
holds all of a cycle or none of it). A block with no work that touches one other block alone
joins it when that cannot cost memory or support (dp.cpp merges such nodes regardless, which
can cost the optimum where memory binds): GNMT's layer graph has 17,914 ideals so, over
2,000,000 without.

A contiguous split is then a chain of ideals, empty to full, one device per difference.
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from tf_placeto.errors import InputError
from tf_placeto.graph.cost_graph import CostGraph, topological_order

# Far beyond their DP's limit (60,000): the DP holds no pairs of ideals, only a row each.
MAX_IDEALS = 1_000_000


class TooManyIdeals(InputError):
    """The graph is too wide for the exact contiguous DP: its ideals exceed the cap."""


@dataclasses.dataclass(frozen=True, eq=False)
class Blocks:
    """The graph's nodes grouped into blocks numbered in a topological order of their DAG."""

    block_of: np.ndarray            # int64 per node
    preds_ptr: np.ndarray           # CSR of each block's predecessors in the DAG
    preds: np.ndarray
    succs_ptr: np.ndarray
    succs: np.ndarray
    cpu_latency: np.ndarray         # per block, its nodes' sums
    accel_latency: np.ndarray
    size: np.ndarray
    unsupported: np.ndarray         # int64: nodes an accelerator cannot run

    @property
    def n_blocks(self) -> int:
        return int(self.cpu_latency.shape[0])


@dataclasses.dataclass(frozen=True, eq=False)
class Ideals:
    """Every ideal of a block DAG, smallest first (0: empty, last: all blocks), with the
    ideals just below each: removing maximal block `down_block[e]` of ideal i leaves ideal
    `down_ideal[e]`, for e in down_ptr[i]:down_ptr[i + 1]."""

    bits: np.ndarray                # uint64 [n_ideals, words]
    down_ptr: np.ndarray
    down_block: np.ndarray
    down_ideal: np.ndarray

    def __len__(self) -> int:
        return int(self.bits.shape[0])

    def members(self, i: int) -> np.ndarray:
        """The blocks of ideal i."""
        words = self.bits[i]
        return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))


def contract(graph: CostGraph) -> Blocks:
    """The blocks of `graph`, as their DP sees it; an InputError for an edge from a backward
    node to a forward one, which their model has no place for."""
    fwd = ~graph.is_backward
    src, dst = graph.edge_src, graph.edge_dst
    back_to_fwd = np.flatnonzero(graph.is_backward[src] & fwd[dst])
    if back_to_fwd.size:
        e = back_to_fwd[0]
        raise InputError(f"{graph.source}: edge {graph.node_ids[src[e]]} -> "
                         f"{graph.node_ids[dst[e]]} runs from a backward node to a forward one")
    cls = graph.color_class
    n_classes = int(cls.max()) + 1
    has_forward = np.bincount(cls[fwd], minlength=n_classes) > 0
    # The DAG over classes: forward edges, and mirrored backward edges of orphaned classes.
    both_fwd = fwd[src] & fwd[dst]
    both_back = graph.is_backward[src] & graph.is_backward[dst]
    orphan = both_back & ~(has_forward[cls[src]] & has_forward[cls[dst]])
    a = np.concatenate([cls[src[both_fwd]], cls[dst[orphan]]])
    b = np.concatenate([cls[dst[both_fwd]], cls[src[orphan]]])
    keep = a != b
    a, b = a[keep], b[keep]
    matrix = coo_matrix((np.ones(a.size), (a, b)), shape=(n_classes, n_classes))
    _, component = connected_components(matrix, directed=True, connection="strong")
    unit, unit_a, unit_b = component[cls], component[a], component[b]
    unit, unit_a, unit_b = _merge_free_blocks(graph, unit, unit_a, unit_b)
    return _numbered(graph, unit, unit_a, unit_b)


def enumerate_ideals(blocks: Blocks, max_ideals: int = MAX_IDEALS) -> Ideals:
    """Every ideal of the blocks' DAG; TooManyIdeals past `max_ideals`."""
    n = blocks.n_blocks
    words = max(1, (n + 63) // 64)
    bits, count = _ideals(n, words, blocks.preds_ptr, blocks.preds, max_ideals)
    if count > max_ideals:
        raise TooManyIdeals(
            f"the graph's {n} blocks have more than {max_ideals:,} ideals (downward-closed "
            "sets): it is too wide for the exact contiguous DP; group its nodes into fewer "
            "colour classes, or raise max_ideals")
    bits = bits[:count]
    bits = bits[np.argsort(_popcounts(bits), kind="stable")]    # each after those below it
    down_ptr, down_block, down_ideal = _covers(bits, blocks.succs_ptr, blocks.succs)
    return Ideals(bits=bits, down_ptr=down_ptr, down_block=down_block, down_ideal=down_ideal)


def _merge_free_blocks(graph: CostGraph, unit, unit_a, unit_b):
    """Joins each block without work whose DAG neighbour and edges lead to one block alone
    into that block, while doing so can move no memory onto, and no unsupported node into,
    a block that lacked them; repeated until none is left. Moving such a block next to its
    only neighbour keeps a chain of ideals a chain and removes crossings: never worse."""
    n_units = int(unit.max()) + 1
    work = np.bincount(unit, weights=graph.cpu_latency + graph.accel_latency,
                       minlength=n_units)
    size = np.bincount(unit, weights=graph.size, minlength=n_units)
    unsupported = np.bincount(unit, weights=~graph.supported, minlength=n_units)
    memory_free = graph.size.sum() <= graph.memory_per_accelerator
    dag = [set() for _ in range(n_units)]
    for x, y in zip(unit_a.tolist(), unit_b.tolist()):
        dag[x].add(y)
        dag[y].add(x)
    touches = [set() for _ in range(n_units)]
    for x, y in zip(unit[graph.edge_src].tolist(), unit[graph.edge_dst].tolist()):
        if x != y:
            touches[x].add(y)
            touches[y].add(x)
    parent = np.arange(n_units)
    pending = list(range(n_units))
    while pending:
        x = pending.pop()
        if parent[x] != x or work[x] != 0 or len(dag[x]) != 1 or not touches[x] <= dag[x]:
            continue
        (y,) = dag[x]
        if (size[x] and not memory_free) or (unsupported[x] and not unsupported[y]):
            continue
        parent[x] = y
        size[y] += size[x]
        for table in (dag, touches):
            for z in table[x]:
                table[z].discard(x)
                if z != y:
                    table[z].add(y)
                    table[y].add(z)
            table[y].discard(y)
            table[x] = set()
        pending.append(y)
        pending.extend(dag[y])
    root = parent.copy()
    while True:                         # each merged block points to the one it joined
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    return root[unit], root[unit_a], root[unit_b]


def _numbered(graph: CostGraph, unit, unit_a, unit_b) -> Blocks:
    """Blocks renumbered 0..B-1 in a topological order of their DAG."""
    used, unit = np.unique(unit, return_inverse=True)
    remap = np.full(int(used.max()) + 1, -1, np.int64)
    remap[used] = np.arange(used.size)
    a, b = remap[unit_a], remap[unit_b]
    keep = a != b
    pairs = np.unique(a[keep] * used.size + b[keep])
    a, b = pairs // used.size, pairs % used.size
    order = topological_order(used.size, a, b)
    assert len(order) == used.size, "fusing strongly connected classes leaves a DAG"
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    unit, a, b = rank[unit], rank[a], rank[b]
    n = used.size
    preds_ptr, preds = _csr(n, b, a)
    succs_ptr, succs = _csr(n, a, b)
    sums = [np.bincount(unit, weights=w, minlength=n) for w in
            (graph.cpu_latency, graph.accel_latency, graph.size)]
    unsupported = np.bincount(unit, weights=~graph.supported, minlength=n).astype(np.int64)
    return Blocks(block_of=unit.astype(np.int64), preds_ptr=preds_ptr, preds=preds,
                  succs_ptr=succs_ptr, succs=succs, cpu_latency=sums[0],
                  accel_latency=sums[1], size=sums[2], unsupported=unsupported)


def _csr(n: int, key, value):
    """Row pointers and values of `value` grouped by `key` (0..n-1)."""
    order = np.argsort(key, kind="stable")
    return np.searchsorted(key[order], np.arange(n + 1)).astype(np.int64), \
        value[order].astype(np.int64)


@numba.njit(cache=True)
def _ideals(n, words, preds_ptr, preds, max_ideals):
    """Ideals by deciding blocks in topological order: a block may join when all its
    predecessors have; leaving one out is always allowed, so every path ends in an ideal."""
    capacity = 1024
    out = np.zeros((capacity, words), np.uint64)
    count = 0
    current = np.zeros(words, np.uint64)
    # choice[i]: 0 = not decided yet, 1 = block i taken, 2 = block i left out
    choice = np.zeros(n + 1, np.int8)
    depth = 0
    while depth >= 0:
        if depth == n:
            if count == capacity:
                grown = np.zeros((capacity * 2, words), np.uint64)
                grown[:capacity] = out
                out, capacity = grown, capacity * 2
            out[count] = current
            count += 1
            if count > max_ideals:
                return out, count
            depth -= 1
            continue
        word, bit = depth >> 6, np.uint64(1) << np.uint64(depth & 63)
        if choice[depth] == 0:
            choice[depth] = 1
            allowed = True
            for k in range(preds_ptr[depth], preds_ptr[depth + 1]):
                p = preds[k]
                if current[p >> 6] & (np.uint64(1) << np.uint64(p & 63)) == 0:
                    allowed = False
                    break
            if allowed:
                current[word] |= bit
                depth += 1
                continue
        if choice[depth] == 1:
            choice[depth] = 2
            current[word] &= ~bit
            depth += 1
            continue
        choice[depth] = 0
        depth -= 1
    return out, count


@numba.njit(cache=True)
def _popcounts(bits):
    counts = np.zeros(bits.shape[0], np.int64)
    for i in range(bits.shape[0]):
        for w in range(bits.shape[1]):
            x = bits[i, w]
            while x:
                x &= x - np.uint64(1)
                counts[i] += 1
    return counts


@numba.njit(cache=True)
def _hash(row):
    h = np.uint64(1469598103934665603)
    for x in row:
        h = (h ^ x) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return h


@numba.njit(cache=True)
def _covers(bits, succs_ptr, succs):
    """The ideals just below each ideal, found through an open-addressing table of bitsets."""
    n_ideals, words = bits.shape
    table_size = 1
    while table_size < 2 * n_ideals:
        table_size *= 2
    mask = np.uint64(table_size - 1)
    table = np.full(table_size, -1, np.int64)
    for i in range(n_ideals):
        slot = _hash(bits[i]) & mask
        while table[slot] >= 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = i
    n_blocks = succs_ptr.shape[0] - 1
    ptr = np.zeros(n_ideals + 1, np.int64)
    capacity = 4 * n_ideals + 16
    block = np.empty(capacity, np.int64)
    ideal = np.empty(capacity, np.int64)
    row = np.empty(words, np.uint64)
    count = 0
    for i in range(n_ideals):
        for v in range(n_blocks):
            bit = np.uint64(1) << np.uint64(v & 63)
            if bits[i, v >> 6] & bit == 0:
                continue
            maximal = True
            for k in range(succs_ptr[v], succs_ptr[v + 1]):
                s = succs[k]
                if bits[i, s >> 6] & (np.uint64(1) << np.uint64(s & 63)):
                    maximal = False
                    break
            if not maximal:
                continue
            row[:] = bits[i]
            row[v >> 6] &= ~bit
            slot = _hash(row) & mask
            while True:
                j = table[slot]
                same = True
                for w in range(words):
                    if bits[j, w] != row[w]:
                        same = False
                        break
                if same:
                    break
                slot = (slot + np.uint64(1)) & mask
            if count == capacity:
                block = np.concatenate((block, np.empty(capacity, np.int64)))
                ideal = np.concatenate((ideal, np.empty(capacity, np.int64)))
                capacity *= 2
            block[count] = v
            ideal[count] = j
            count += 1
        ptr[i + 1] = count
    return ptr, block[:count], ideal[:count]
