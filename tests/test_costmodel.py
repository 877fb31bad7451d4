"""Cost model: keyed by what changes costs, stored in open formats, loaded intact."""

import json
import os

import numpy as np
import pandas as pd
import pytest

import tf_placeto as tp
from measure.costmodel import CostModel, profile_key


@pytest.fixture(scope="module")
def graph(mlp_model):
    return tp.import_graph(mlp_model)


def _model(graph):
    ops = pd.DataFrame({"op": [op.name for op in graph.ops], "device_type": "CPU",
                        "compute_us": np.arange(len(graph), dtype=float),
                        "output_bytes": 4, "traced": True})
    links = pd.DataFrame([{"src": "/device:CPU:0", "dst": "/device:CPU:1",
                           "latency_us": 20.0, "bytes_per_us": 1000.0},
                          {"src": "/device:CPU:1", "dst": "/device:CPU:0",
                           "latency_us": 20.0, "bytes_per_us": 1000.0}])
    return CostModel(ops=ops, links=links, meta={"key": "k", "devices": ["a"]})


def test_the_key_changes_with_devices_but_not_with_reloading(graph, mlp_model):
    same, _ = profile_key(tp.import_graph(mlp_model), ["/device:CPU:0"])
    assert profile_key(graph, ["/device:CPU:0"])[0] == same
    assert profile_key(graph, ["/device:CPU:0", "/device:CPU:1"])[0] != same
    _, parts = profile_key(graph, ["/device:CPU:0"])
    assert parts["inputs"] and parts["tensorflow"] and parts["graph"]


def test_save_and_load_round_trip_in_open_formats(graph, tmp_path):
    model = _model(graph)
    directory = str(tmp_path / "profile")
    model.save(directory)
    assert sorted(os.listdir(directory)) == ["links.csv", "ops.csv", "profile.json"]
    json.load(open(os.path.join(directory, "profile.json")))
    loaded = CostModel.load(directory)
    pd.testing.assert_frame_equal(loaded.ops, model.ops, check_dtype=False)
    np.testing.assert_array_equal(loaded.compute_us(graph, ["CPU"]), model.compute_us(graph, ["CPU"]))
    assert CostModel.load(str(tmp_path / "nothing")) is None


def test_arrays_for_the_simulator(graph):
    model = _model(graph)
    costs = model.compute_us(graph, ["CPU"])
    assert costs.shape == (len(graph), 1) and costs[3, 0] == 3.0
    latency, bandwidth = model.link_arrays(["/device:CPU:0", "/device:CPU:1"])
    assert latency[0, 1] == 20.0 and latency[0, 0] == 0.0 and np.isinf(bandwidth[1, 1])
    with pytest.raises(ValueError, match="GPU"):
        model.compute_us(graph, ["GPU"])
    with pytest.raises(ValueError, match="no link"):
        model.link_arrays(["/device:CPU:0", "/device:CPU:2"])
