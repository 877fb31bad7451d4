"""The tf-placeto command as a user meets it: the inspect/apply contract and bad input."""

import json
import os

import pytest

from helpers import run_cli, tree_digest
from tf_placeto.graph.sources import load_source as tp_load


@pytest.fixture(scope="module")
def inspected(mlp_model):
    result = run_cli("inspect", mlp_model, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_inspect_json_lists_every_op_in_exactly_one_group(inspected):
    ops = [op for group in inspected["groups"] for op in group["ops"]]
    assert len(ops) == len(set(ops)) == inspected["num_ops"]
    assert inspected["num_groups"] == len(inspected["groups"])
    assert [g["id"] for g in inspected["groups"]] == list(range(inspected["num_groups"]))
    assert inspected["num_colocation_groups"] == len(inspected["colocation_groups"]) > 0


def test_inspect_respects_max_groups(mlp_model):
    result = run_cli("inspect", mlp_model, "--json", "--max-groups", "3")
    assert json.loads(result.stdout)["num_groups"] <= 3


def test_inspect_prints_a_readable_summary(mlp_model):
    result = run_cli("inspect", mlp_model)
    assert result.returncode == 0 and result.stderr == ""
    assert "ops:" in result.stdout and "colocation groups:" in result.stdout
    assert "first op" in result.stdout


def _round_robin_file(inspected, path):
    path.write_text(json.dumps({op: f"/device:CPU:{g['id'] % 2}"
                                for g in inspected["groups"] for op in g["ops"]}))
    return str(path)


def test_apply_writes_the_placed_model(mlp_model, inspected, tmp_path):
    placement = _round_robin_file(inspected, tmp_path / "p.json")
    out = str(tmp_path / "out")
    result = run_cli("apply", mlp_model, "--placement", placement, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "/device:CPU:1" in result.stdout
    assert os.path.isfile(os.path.join(out, "saved_model.pb"))


def _bad_inputs(mlp_model, inspected, tmp):
    colocated = inspected["colocation_groups"][0]["ops"]
    files = {
        "unknown_op.json": {"no/such/op": "/device:CPU:0"},
        "unknown_device.json": {colocated[0]: "/device:GPU:7"},
        "not_a_device.json": {colocated[0]: "banana"},
        "split.json": {colocated[0]: "/device:CPU:0", colocated[1]: "/device:CPU:1"},
        "list.json": ["not", "an", "object"],
    }
    for name, content in files.items():
        (tmp / name).write_text(json.dumps(content))
    with open(os.path.join(mlp_model, "saved_model.pb"), "rb") as f:
        data = f.read()
    (tmp / "truncated.pb").write_bytes(data[: len(data) // 3])
    (tmp / "empty.pb").write_bytes(b"")
    from tensorflow.core.framework import graph_pb2

    whole = tp_load(mlp_model).graph_def
    cut = graph_pb2.GraphDef()                       # ends at a node boundary, as a cut file does
    cut.node.extend(whole.node[: len(whole.node) // 2])
    (tmp / "cut_at_node.pb").write_bytes(cut.SerializeToString())
    (tmp / "negative.json").write_text(json.dumps({colocated[0]: "/device:CPU:-1"}))
    truncated_dir = tmp / "truncated_model"
    truncated_dir.mkdir()
    (truncated_dir / "saved_model.pb").write_bytes(data[: len(data) // 2])
    (tmp / "not_a_model").mkdir()
    good = str(tmp / "good.json")
    (tmp / "good.json").write_text("{}")
    out = str(tmp / "out")
    return {
        "missing path": ["inspect", str(tmp / "missing")],
        "truncated .pb": ["inspect", str(tmp / "truncated.pb")],
        "empty file": ["inspect", str(tmp / "empty.pb")],
        "cut at a node boundary": ["inspect", str(tmp / "cut_at_node.pb")],
        "negative device index": ["apply", mlp_model, "--placement", str(tmp / "negative.json"), "--out", out],
        "placement is a directory": ["apply", mlp_model, "--placement", str(tmp / "not_a_model"), "--out", out],
        "truncated SavedModel": ["inspect", str(truncated_dir)],
        "not a SavedModel": ["inspect", str(tmp / "not_a_model")],
        "unknown signature": ["inspect", mlp_model, "--signature", "nope"],
        "unknown example": ["inspect", "examples:nope"],
        "bad max groups": ["inspect", mlp_model, "--max-groups", "0"],
        "unknown op": ["apply", mlp_model, "--placement", str(tmp / "unknown_op.json"), "--out", out],
        "unknown device": ["apply", mlp_model, "--placement", str(tmp / "unknown_device.json"), "--out", out],
        "not a device": ["apply", mlp_model, "--placement", str(tmp / "not_a_device.json"), "--out", out],
        "split colocation": ["apply", mlp_model, "--placement", str(tmp / "split.json"), "--out", out],
        "placement not an object": ["apply", mlp_model, "--placement", str(tmp / "list.json"), "--out", out],
        "missing placement": ["apply", mlp_model, "--placement", str(tmp / "none.json"), "--out", out],
        "OUT is SOURCE": ["apply", mlp_model, "--placement", good, "--out", mlp_model],
        "usage": ["apply", mlp_model],
    }


def test_bad_input_gives_one_line_and_changes_nothing(mlp_model, inspected, tmp_path):
    cases = _bad_inputs(mlp_model, inspected, tmp_path)
    before = tree_digest(mlp_model)
    for label, args in cases.items():
        result = run_cli(*args)
        lines = result.stderr.splitlines()
        assert result.returncode == 2, (label, result.stderr)
        assert len(lines) == 1 and lines[0].startswith("tf-placeto"), (label, result.stderr)
        assert "Traceback" not in result.stderr
        assert not os.path.exists(tmp_path / "out"), label
    assert tree_digest(mlp_model) == before


def _placement_file(inspected, path, devices):
    path.write_text(json.dumps({op: devices[g["id"] % len(devices)]
                                for g in inspected["groups"] for op in g["ops"]}))
    return str(path)


def test_profile_stores_a_cost_model_and_finds_it_again(mlp_model, tmp_path):
    cache = str(tmp_path / "cache")
    first = run_cli("profile", mlp_model, "--devices", "2", "--runs", "2", "--cache", cache, "--json")
    assert first.returncode == 0, first.stderr
    profiled = json.loads(first.stdout)
    assert not profiled["cached"] and profiled["traced_ops"] > 0
    assert [(l["src"], l["dst"]) for l in profiled["links"]] == [
        ("/device:CPU:0", "/device:CPU:1"), ("/device:CPU:1", "/device:CPU:0")]
    again = run_cli("profile", mlp_model, "--devices", "2", "--cache", cache)
    assert again.returncode == 0 and "found in the cache" in again.stdout
    assert "found a profile in the cache" in again.stderr


def test_measure_runs_several_placements_and_simulates_them(mlp_model, inspected, tmp_path):
    cache = str(tmp_path / "cache")
    files = [_placement_file(inspected, tmp_path / "split.json", ["/device:CPU:0", "/device:CPU:1"]),
             _placement_file(inspected, tmp_path / "one.json", ["/device:CPU:1"])]
    args = ["measure", mlp_model, "--devices", "2", "--cache", cache, "--json",
            "--placement", files[0], "--placement", files[1]]
    real = run_cli(*args, "--repeats", "3")
    assert real.returncode == 0, real.stderr
    results = json.loads(real.stdout)
    assert [r["label"] for r in results] == files
    assert all(r["status"] == "ok" and r["runs"] == 3 and not r["simulated"] for r in results)
    assert all(r["step_time_s"] > 0 and r["spread_s"] >= 0 for r in results)
    simulated = json.loads(run_cli(*args, "--simulate").stdout)
    assert all(r["simulated"] and r["step_time_s"] > 0 for r in simulated)
    assert set(simulated[1]["busy_s"]) == {"/device:CPU:0", "/device:CPU:1"}
    assert simulated[1]["busy_s"]["/device:CPU:0"] < simulated[1]["busy_s"]["/device:CPU:1"]


def test_measure_on_a_local_cluster(mlp_model, inspected, tmp_path):
    tasks = [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in range(2)]
    placement = _placement_file(inspected, tmp_path / "tasks.json", tasks)
    result = run_cli("measure", mlp_model, "--cluster", "local:2", "--placement", placement,
                     "--repeats", "2", "--cache", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout and placement in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--devices", "2", "--cluster", "local:2"], "not both"),
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["--cluster", "local:zero"], "local:N with N >= 1"),
    (["--cluster", '{"worker": ["nohost"]}'], "not an address"),
])
def test_measure_bad_input_gives_one_line(mlp_model, args, message):
    result = run_cli("measure", mlp_model, *args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.splitlines()) == 1
