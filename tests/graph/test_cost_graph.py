"""Cost graphs in Tarnawski et al.'s JSON format: reading, detection, bad files, experts'
splits. Every instance is written here; nothing of theirs is read."""

import json

import numpy as np
import pytest

from tf_placeto.errors import SourceError
from tf_placeto.graph.cost_graph import (expert_file, is_cost_graph_file, parse_cost_graph,
                                         read_cost_graph, read_expert_split)


def _instance(**top):
    """A training graph: forward 10 -> 11 -> 12, backward 22 -> 21, classes pairing them;
    node 12 has no colour class and node 11 no size."""
    nodes = [
        {"id": 10, "name": "in", "supportedOnFpga": 1, "cpuLatency": 1.0, "fpgaLatency": 0.5,
         "isBackwardNode": 0, "colorClass": 7, "size": 8.0},
        {"id": 11, "name": "mid", "supportedOnFpga": True, "cpuLatency": 2, "fpgaLatency": 1,
         "isBackwardNode": False, "colorClass": 3},
        {"id": 12, "supportedOnFpga": 0, "cpuLatency": 3.0, "fpgaLatency": 0.0,
         "isBackwardNode": 0, "size": 1.0},
        {"id": 22, "supportedOnFpga": 1, "cpuLatency": 4.0, "fpgaLatency": 2.0,
         "isBackwardNode": 1, "colorClass": 3, "size": 2.0},
        {"id": 21, "supportedOnFpga": 1, "cpuLatency": 5.0, "fpgaLatency": 2.5,
         "isBackwardNode": 1, "colorClass": 7, "size": 2.0},
    ]
    edges = [{"sourceId": 10, "destId": 11, "cost": 0.25},
             {"sourceId": 11, "destId": 12, "cost": 0.5, "size": 4},
             {"sourceId": 11, "destId": 22, "cost": 0.5},
             {"sourceId": 12, "destId": 22, "cost": 0.75},
             {"sourceId": 22, "destId": 21, "cost": 0.125}]
    return {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes,
            "edges": edges, **top}


def _write(tmp_path, data, name="graph.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_reads_nodes_edges_and_devices(tmp_path):
    graph = read_cost_graph(_write(tmp_path, _instance()))
    assert graph.node_ids.tolist() == [10, 11, 12, 22, 21]
    assert graph.names == ("in", "mid", "", "", "")
    assert graph.cpu_latency.tolist() == [1, 2, 3, 4, 5]
    assert graph.accel_latency.tolist() == [0.5, 1, 0, 2, 2.5]
    assert graph.supported.tolist() == [True, True, False, True, True]
    assert graph.is_backward.tolist() == [False, False, False, True, True]
    assert graph.size.tolist() == [8, 0, 1, 2, 2]
    assert (graph.max_accelerators, graph.max_cpus, graph.n_devices) == (2, 1, 3)
    assert graph.memory_per_accelerator == 100.0
    assert list(zip(graph.edge_src.tolist(), graph.edge_dst.tolist())) == \
        [(0, 1), (1, 2), (1, 3), (2, 3), (3, 4)]
    assert graph.output_cost.tolist() == [0.25, 0.5, 0.75, 0.125, 0.0]
    assert graph.source.endswith("graph.json")


def test_colour_classes_are_shared_and_a_node_without_one_is_alone(tmp_path):
    cc = read_cost_graph(_write(tmp_path, _instance())).color_class
    assert cc[0] == cc[4] and cc[1] == cc[3]
    assert len({cc[0], cc[1], cc[2]}) == 3


def test_the_topological_order_respects_every_edge(tmp_path):
    graph = read_cost_graph(_write(tmp_path, _instance()))
    rank = np.empty(graph.n_nodes, np.int64)
    rank[graph.topological_order] = np.arange(graph.n_nodes)
    assert sorted(graph.topological_order.tolist()) == list(range(graph.n_nodes))
    assert (rank[graph.edge_src] < rank[graph.edge_dst]).all()


def test_detection_by_the_top_level_fields(tmp_path):
    assert is_cost_graph_file(_write(tmp_path, _instance()))
    assert is_cost_graph_file(str(_write(tmp_path, _instance(), "as_str.json")))
    assert not is_cost_graph_file(_write(tmp_path, _instance(), "graph.pbtxt"))
    lacking = {key: value for key, value in _instance().items() if key != "edges"}
    assert not is_cost_graph_file(_write(tmp_path, lacking, "lacking.json"))
    nested = {"model": _instance()}
    assert not is_cost_graph_file(_write(tmp_path, nested, "nested.json"))
    assert not is_cost_graph_file(_write(tmp_path, '{"maxFPGAs": 2, "nodes": [', "cut.json"))
    assert not is_cost_graph_file(_write(tmp_path, [1, 2], "list.json"))
    assert not is_cost_graph_file(tmp_path / "missing.json")
    (tmp_path / "folder.json").mkdir()
    assert not is_cost_graph_file(tmp_path / "folder.json")


def _broken(change):
    data = _instance()
    change(data)
    return data


@pytest.mark.parametrize("change, message", [
    (lambda d: d.pop("maxFPGAs"), "lacks maxFPGAs"),
    (lambda d: d.update(maxCPUs=-1), "maxCPUs must be at least 0"),
    (lambda d: d.update(maxFPGAs=2.5), "maxFPGAs must be an integer"),
    (lambda d: d.update(nodes=[]), "'nodes' must be a non-empty list"),
    (lambda d: d["nodes"][1].pop("cpuLatency"), "node 1 has no 'cpuLatency'"),
    (lambda d: d["nodes"][1].update(fpgaLatency=-1.0), "node 11's fpgaLatency must be a finite"),
    (lambda d: d["nodes"][1].update(size="big"), "node 11's size must be a finite"),
    (lambda d: d["nodes"][1].update(isBackwardNode=2), "isBackwardNode must be true, false"),
    (lambda d: d["nodes"][2].update(id=10), "node 10 appears twice"),
    (lambda d: d["edges"][0].update(destId=99), "edge 0 names node 99, which is not among"),
    (lambda d: d["edges"][0].pop("cost"), "edge 0 needs sourceId, destId and cost"),
    (lambda d: d["edges"][0].update(destId=10), "edge 0 is a self-loop on node 10"),
    (lambda d: d["edges"][2].update(cost=9.0), "node 11's edges cost 0.5 and 9.0"),
    (lambda d: d["edges"].append({"sourceId": 12, "destId": 10, "cost": 0.75}),
     "the edges form a cycle"),
])
def test_a_bad_instance_is_named_with_what_is_wrong(tmp_path, change, message):
    path = _write(tmp_path, _broken(change))
    with pytest.raises(SourceError, match=message) as caught:
        read_cost_graph(path)
    assert str(path) in str(caught.value)


def test_files_that_are_not_json_or_not_there(tmp_path):
    with pytest.raises(SourceError, match="not valid JSON"):
        read_cost_graph(_write(tmp_path, "{nodes: 1}"))
    with pytest.raises(SourceError, match="no such file"):
        read_cost_graph(tmp_path / "missing.json")
    with pytest.raises(SourceError, match="top level is not a JSON object"):
        parse_cost_graph([_instance()])


def test_an_experts_split_places_the_backward_nodes_with_their_class(tmp_path):
    graph = read_cost_graph(_write(tmp_path, _instance()))
    split = {"maxLoad": -1, "cpus": [{"load": 0.0, "nodes": [12]}],
             "fpgas": [{"load": -1, "nodes": [10]}, {"load": -1, "nodes": [11]}]}
    assignment = read_expert_split(_write(tmp_path, split, "split.json"), graph)
    assert assignment.tolist() == [0, 1, 2, 1, 0]


@pytest.mark.parametrize("split, message", [
    ({"cpus": [], "fpgas": [{"nodes": [10, 11, 12, 99]}]}, "node 99 is not in"),
    ({"cpus": [], "fpgas": [{"nodes": [10, 11]}, {"nodes": [11, 12]}]}, "node 11 is on two"),
    ({"cpus": [], "fpgas": [{"nodes": [10, 11]}]}, "node 12 is not placed"),
    ({"cpus": [], "fpgas": [{"nodes": [10, 11, 12]}] * 3}, "uses 3 accelerators"),
    ({"fpgas": []}, "needs lists 'fpgas' and 'cpus'"),
])
def test_a_bad_split_is_named(tmp_path, split, message):
    graph = read_cost_graph(_write(tmp_path, _instance()))
    with pytest.raises(SourceError, match=message):
        read_expert_split(_write(tmp_path, split, "split.json"), graph)


def test_a_graph_finds_its_own_experts_split_else_its_inference_graphs(tmp_path):
    experts = tmp_path / "human-experts"
    experts.mkdir()
    for stem in ("gnmt_inference", "bert_training", "bert_inference", "resnet_inference"):
        _write(experts, {"fpgas": [], "cpus": []}, f"{stem}_expert.json")
    layers = tmp_path / "LayerGraphs"
    assert expert_file(experts, layers / "gnmt_training.json") == \
        experts / "gnmt_inference_expert.json"
    assert expert_file(str(experts), layers / "bert_training.json") == \
        experts / "bert_training_expert.json"
    assert expert_file(experts, layers / "inception_training.json") is None
    # their operator graphs share the layer graphs' names, not their experts' splits
    assert expert_file(experts, tmp_path / "OperatorGraphs" / "resnet_inference.json") is None
    assert expert_file(experts, tmp_path / "resnet_inference.json") == \
        experts / "resnet_inference_expert.json"
