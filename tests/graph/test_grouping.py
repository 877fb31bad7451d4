"""Grouping: every op in one group, colocation whole, acyclic, balanced, deterministic."""

import numpy as np
import pytest

import tf_placeto as tp


@pytest.fixture(scope="module")
def graph(small_cnn_model):
    return tp.import_graph(small_cnn_model)


@pytest.mark.parametrize("max_groups", [1, 4, 16, 10_000])
def test_groups_partition_the_ops_within_the_limit(graph, max_groups):
    groups = tp.group(graph, max_groups=max_groups)
    assert 1 <= len(groups) <= max_groups
    seen = sorted(i for g in groups.groups for i in g)
    assert seen == list(range(len(graph)))
    for g, ops in enumerate(groups.groups):
        assert all(groups.group_of[i] == g for i in ops)


def test_colocation_groups_are_never_split(graph):
    groups = tp.group(graph, max_groups=16)
    for members in groups.colocation.members:
        assert len({int(groups.group_of[i]) for i in members}) == 1


def test_group_edges_form_a_dag_in_id_order(graph):
    groups = tp.group(graph, max_groups=16)
    assert all(a < b for a, b in groups.edges)
    assert all(a > b for a, b in groups.feedback_edges)
    # Every op-level dependency between groups is accounted for, forward or as feedback.
    for e in graph.data_edges:
        a, b = int(groups.group_of[e.src]), int(groups.group_of[e.dst])
        if a != b:
            assert (a, b) in groups.edges or (a, b) in groups.feedback_edges


def test_feedback_edges_only_come_from_colocation(graph):
    """Without colocation sets spanning the step, the group graph needs no feedback edges."""
    groups = tp.group(graph, max_groups=16)
    multi = set(groups.colocation.multi_op_sets())
    for (a, b) in groups.feedback_edges:
        sets_in_target = set(groups.colocation.set_of[groups.groups[b]].tolist())
        assert sets_in_target & multi


def test_grouping_is_deterministic(graph, small_cnn_model):
    first = tp.group(graph, max_groups=12)
    second = tp.group(tp.import_graph(small_cnn_model), max_groups=12)
    assert [first.op_names(g) for g in range(len(first))] == \
        [second.op_names(g) for g in range(len(second))]


def test_groups_are_balanced(graph):
    max_groups = 8
    groups = tp.group(graph, max_groups=max_groups)
    work = groups.op_work / groups.op_work.sum()
    weight = 0.5 * work + 0.5 / len(graph)
    per_group = np.bincount(groups.group_of, weights=weight)
    heaviest_atom = max(weight[members].sum() for members in groups.colocation.members)
    # Each group holds about 1/max_groups of the weight, more only by one indivisible piece.
    assert per_group.max() <= 1.0 / max_groups + heaviest_atom + 1e-9


def test_custom_work_changes_the_balance(graph):
    uniform = tp.group(graph, max_groups=4, op_work=np.ones(len(graph)))
    sizes = [len(g) for g in uniform.groups]
    assert max(sizes) <= 2 * len(graph) / 4 + max(len(m) for m in uniform.colocation.members)


def test_coarsening_merges_consecutive_groups_and_keeps_the_rules(graph):
    from tf_placeto.graph.grouping import coarsen

    fine = tp.group(graph, max_groups=32)
    coarse, chunk_of_group = coarsen(fine, 5)
    assert len(coarse) <= 5 and len(chunk_of_group) == len(fine)
    assert np.all(np.diff(chunk_of_group) >= 0)                  # consecutive ids merged
    np.testing.assert_array_equal(coarse.group_of, chunk_of_group[fine.group_of])
    assert all(a < b for a, b in coarse.edges)
    for members in coarse.colocation.members:
        assert len({int(coarse.group_of[i]) for i in members}) == 1
    same, identity = coarsen(fine, 100)
    assert len(same) == len(fine) and list(identity) == list(range(len(fine)))
