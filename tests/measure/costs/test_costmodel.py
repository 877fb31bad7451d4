"""Cost model: keyed by what changes costs, stored in open formats, loaded intact."""

import json
import os

import numpy as np
import pandas as pd
import pytest

import tf_placeto as tp
from tf_placeto.measure.costs.costmodel import CostModel, profile_key, write_table

HERE = {"runtime": "this process", "host": "here", "cpu": "a CPU", "cores": 2, "gpus": [],
        "tensorflow": "2.21.0"}


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


def test_the_key_changes_with_devices_and_runtime_but_not_with_reloading(graph, mlp_model):
    same, _ = profile_key(tp.import_graph(mlp_model), ["/device:CPU:0"], HERE)
    assert profile_key(graph, ["/device:CPU:0"], HERE)[0] == same
    assert profile_key(graph, ["/device:CPU:0", "/device:CPU:1"], HERE)[0] != same
    for other in ({"host": "there"}, {"tensorflow": "2.22.0"}, {"cores": 1}):
        assert profile_key(graph, ["/device:CPU:0"], {**HERE, **other})[0] != same
    _, parts = profile_key(graph, ["/device:CPU:0"], HERE)
    assert parts["inputs"] and parts["runtime"] == HERE and parts["graph"]


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


def _cut_short(path):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 3])


def _one_link_less(path):
    """links.csv without its last link, recorded so in profile.json: whole, but a pair of
    devices has no link."""
    meta_path = os.path.join(os.path.dirname(path), "profile.json")
    meta = json.load(open(meta_path))
    meta["tables"]["links.csv"] = write_table(path, pd.read_csv(path).iloc[:-1])
    json.dump(meta, open(meta_path, "w"))


@pytest.mark.parametrize("damaged, damage, why", [
    ("profile.json", _cut_short, "profile.json does not parse"),
    ("ops.csv", _cut_short, "cut short"), ("links.csv", _cut_short, "cut short"),
    ("links.csv", _one_link_less, "no link measurement from /device:CPU:1 to /device:CPU:0")])
def test_a_damaged_profile_is_named_and_removed_but_its_run_logs_kept(graph, tmp_path, caplog,
                                                                      damaged, damage, why):
    directory = str(tmp_path / "profile")
    model = _model(graph)
    model.meta["devices"] = ["/device:CPU:0", "/device:CPU:1"]
    model.save(directory)
    assert CostModel.load(directory) is not None
    with open(os.path.join(directory, "results.jsonl"), "w") as log:
        log.write('{"key": "measured"}\n')
    damage(os.path.join(directory, damaged))
    with caplog.at_level("WARNING"):
        assert CostModel.load(directory) is None
    [line] = caplog.messages
    assert line.startswith(f"the cached profile at {directory} is damaged (") and why in line
    assert line.endswith("profiling again")
    assert [name for name in os.listdir(directory) if not name.startswith(".")] == \
        ["results.jsonl"]
    caplog.clear()
    assert CostModel.load(directory) is None and not caplog.text   # no entry: no warning


def test_a_save_killed_part_way_leaves_no_cache_hit(graph, tmp_path, monkeypatch):
    directory = str(tmp_path / "profile")
    _model(graph).save(directory)              # an older profile, being replaced

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", killed)   # dies writing profile.json, the last file
    with pytest.raises(KeyboardInterrupt):
        _model(graph).save(directory)
    assert CostModel.load(directory) is None
    assert sorted(os.listdir(directory)) == ["links.csv", "ops.csv"]


def test_arrays_for_the_simulator(graph):
    model = _model(graph)
    costs = model.compute_us(graph, ["CPU"])
    assert costs.shape == (len(graph), 1) and costs[3, 0] == 3.0
    latency, bandwidth, share = model.link_arrays(["/device:CPU:0", "/device:CPU:1"])
    assert latency[0, 1] == 20.0 and latency[0, 0] == 0.0 and np.isinf(bandwidth[1, 1])
    assert not share.any()                  # a profile that did not measure copies: none
    model.links["copy_share"] = 0.4
    assert model.link_arrays(["/device:CPU:0", "/device:CPU:1"])[2][1, 0] == 0.4
    assert not model.remote_extra_us(graph, ["CPU"]).any()   # a profile that did not look
    model.ops["remote_extra_us"] = np.where(model.ops["op"] == graph.ops[2].name, 50.0, 0.0)
    extra = model.remote_extra_us(graph, ["CPU"])
    assert extra.shape == (len(graph), 1) and extra[2, 0] == 50.0 and extra.sum() == 50.0
    with pytest.raises(ValueError, match="GPU"):
        model.compute_us(graph, ["GPU"])
    with pytest.raises(ValueError, match="no link"):
        model.link_arrays(["/device:CPU:0", "/device:CPU:2"])


@pytest.mark.parametrize("profiled, expected", [
    (["/device:CPU:0", "/device:CPU:1"], ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]),
    (["/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"],
     [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in range(3)]),
])
def test_more_devices_like_the_profiled_ones(graph, profiled, expected):
    model = _model(graph)
    model.meta["devices"] = profiled
    model.links["src"] = [profiled[0], profiled[1]]
    model.links["dst"] = [profiled[1], profiled[0]]
    names, bigger = model.with_more_devices(3)
    assert names == expected
    latency, bandwidth, share = bigger.link_arrays(names)
    assert latency[2, 0] == 20.0 and bandwidth[1, 2] == 1000.0 and latency[1, 1] == 0.0
    assert not share.any()
    assert bigger.compute_us(graph, ["CPU"]).sum() == model.compute_us(graph, ["CPU"]).sum()


def test_more_devices_need_a_measured_link(graph):
    model = _model(graph)
    model.meta["devices"] = ["/device:CPU:0"]
    model.links = model.links.iloc[:0]
    with pytest.raises(ValueError, match="at least two devices"):
        model.with_more_devices(2)
    assert model.with_more_devices(1)[0] == ["/device:CPU:0"]


def test_a_placed_copy_has_the_profile_of_its_source(graph, mlp_model, tmp_path):
    from tests.helpers import round_robin

    placed = tp.apply_placement(graph, round_robin(tp.group(graph, max_groups=4)),
                                str(tmp_path / "placed"))
    assert profile_key(tp.import_graph(placed.out), ["/device:CPU:0"], HERE) == \
        profile_key(graph, ["/device:CPU:0"], HERE)


def test_simulated_devices_may_have_other_links(graph):
    from tf_placeto.measure.costs.costmodel import Link

    model = _model(graph)
    model.meta["devices"] = ["/device:CPU:0", "/device:CPU:1"]
    names, k80 = model.with_more_devices(4, Link.parse("25:7600"))
    latency, bandwidth, share = k80.link_arrays(names)
    assert latency[0, 3] == 25.0 and bandwidth[3, 0] == 7600.0 and not share.any()
    assert Link.parse("1:2:0.5") == Link(1.0, 2.0, 0.5)
    for bad in ("fast", "25", "25:0", "-1:5", "1:2:0.7", "1:2:3:4"):
        with pytest.raises(tp.PlacetoError, match="link"):
            Link.parse(bad)


def test_more_devices_keep_the_calibrated_link_unless_another_link_is_asked(graph):
    from tf_placeto.measure.costs.calibration import Calibration
    from tf_placeto.measure.costs.costmodel import Link

    model = _model(graph)
    model.meta["devices"] = ["/device:CPU:0", "/device:CPU:1"]
    model.calibration = Calibration(copy_us=9.0, latency_us=300.0, bytes_per_us=50.0,
                                    copy_share=0.1)
    assert model.with_more_devices(4)[1].calibration == model.calibration
    asked = model.with_more_devices(4, Link.parse("25:7600"))[1].calibration
    assert asked.latency_us is None and asked.bytes_per_us is None and asked.copy_share is None
    assert asked.copy_us == 9.0


def test_a_link_within_one_machine_joins_devices_of_one_task_without_the_clusters_costs(graph):
    from tf_placeto.measure.costs.calibration import Calibration
    from tf_placeto.measure.costs.costmodel import Link

    model = _model(graph)
    model.meta["devices"] = [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in range(2)]
    model.ops["remote_extra_us"] = 5.0
    model.calibration = Calibration(compute_scale=2.0, remote_task_us=3000.0, copy_us=9.0,
                                    iteration_us=4.0)
    assert Link.parse("k80") == Link.parse("machine:25:7600") == Link(25.0, 7600.0, 0.0, True)
    assert not Link.parse("25:7600").one_machine
    names, k80 = model.with_more_devices(3, Link.parse("k80"))
    assert names == [f"/job:worker/replica:0/task:0/device:CPU:{k}" for k in range(3)]
    assert k80.calibration.remote_task_us == k80.calibration.copy_us == 0.0
    assert k80.calibration.iteration_us == 0.0 and k80.calibration.compute_scale == 2.0
    assert not k80.remote_extra_us(graph, ["CPU"]).any()
    tasks = model.with_more_devices(3, Link.parse("25:7600"))[1]
    assert tasks.calibration.remote_task_us == 3000.0
    assert tasks.remote_extra_us(graph, ["CPU"]).any()
