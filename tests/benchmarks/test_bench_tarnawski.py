"""measure/bench_tarnawski.py: the latency row of an instance whose experts' split breaks its
rules also holds the latency program under the experts' rules, from their split."""

import dataclasses
import json

import numpy as np

from measure import bench_tarnawski
from tests.helpers import FORK_INSTANCE
from tf_placeto.graph.cost_graph import read_cost_graph

# The fork, on two accelerators of 25 bytes.
INSTANCE = {**FORK_INSTANCE, "maxSizePerFPGA": 25}
# Three accelerators where the instance has two, 30 bytes on the first.
EXPERTS = {"fpgas": [{"nodes": [0, 1, 2]}, {"nodes": []}, {"nodes": [3]}],
           "cpus": [{"nodes": [4]}]}


def _folder(tmp_path):
    graph = tmp_path / "latency-inputs" / "LayerGraphs" / "fork_inference.json"
    graph.parent.mkdir(parents=True)
    graph.write_text(json.dumps(INSTANCE))
    (tmp_path / "human-experts").mkdir()
    (tmp_path / "human-experts" / "fork_inference_expert.json").write_text(json.dumps(EXPERTS))
    return graph


def test_the_experts_rules_are_their_accelerators_and_their_fullest_memory(tmp_path):
    graph = read_cost_graph(_folder(tmp_path))
    wide = dataclasses.replace(graph, max_accelerators=3)
    rules = bench_tarnawski._experts_rules(wide, np.array([0, 0, 0, 2, 3]))
    assert (rules.max_accelerators, rules.memory_per_accelerator) == (3, 30)
    assert bench_tarnawski._experts_rules(wide, np.array([0, 1, 1, 2, 3])) \
        .memory_per_accelerator == 25                   # the instance's, where that is more


def test_the_program_under_the_experts_rules_is_at_or_below_their_split(tmp_path):
    row = bench_tarnawski.latency_row(tmp_path, _folder(tmp_path), 2.0)
    assert "expert: 3 accelerators, accelerator 0 holds 30 bytes, over its 25" in row["note"]
    assert np.isfinite(row["expert"]) and np.isfinite(row["ip"])
    assert row["ip_experts_rules"] <= row["expert"] + 1e-9
    assert row["ip_experts_rules/expert"] == row["ip_experts_rules"] / row["expert"]


def test_only_latency_inputs_runs_the_latency_instances_alone(tmp_path, capsys):
    _folder(tmp_path)
    assert bench_tarnawski.main([str(tmp_path), "--only", "latency-inputs",
                                 "--ip-seconds", "1"]) == 0
    out = capsys.readouterr().out
    assert "LayerGraphs/fork_inference" in out and "ip_experts_rules" in out
    assert "ours/theirs" not in out                    # no throughput table
