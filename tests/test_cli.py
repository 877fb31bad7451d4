"""The tf-placeto command as a user meets it: the inspect/apply contract and bad input."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import pytest

from tests.helpers import own_workers, run_cli, tree_digest
from tf_placeto.errors import RuntimeFailure
from tf_placeto.graph.sources import load_source as tp_load


@pytest.fixture(scope="module")
def inspected(mlp_model):
    result = run_cli("inspect", mlp_model, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def cli_here(capfd, monkeypatch):
    """Run the command's main() in this process: (exit status, its stderr). For input refused
    before any work: the same lines as the command, without starting TensorFlow again."""
    from tf_placeto import cli

    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS"):      # main() sets defaults
        monkeypatch.setenv(name, os.environ.get(name, ""))

    def run(*args):
        capfd.readouterr()
        try:
            code = cli.main(list(args))
        except SystemExit as exited:               # refused by the argument parser
            code = exited.code
        return code, capfd.readouterr().err
    return run


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
    (tmp / "cpu_index.json").write_text(json.dumps({colocated[0]: "/device:CPU:2147483647"}))
    (tmp / "deep.json").write_text("[" * 100_000)
    (tmp / "recursive.pbtxt").write_text(_CALLS_ITSELF)
    with socket.socket(socket.AF_UNIX) as listening:       # a file that open() refuses
        listening.bind(str(tmp / "socket.pb"))
    os.mkfifo(tmp / "pipe.pb")                             # a file whose open() would wait
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
        "unknown op": ["apply", mlp_model, "--placement", str(tmp / "unknown_op.json"), "--out", out],
        "unknown device": ["apply", mlp_model, "--placement", str(tmp / "unknown_device.json"), "--out", out],
        "not a device": ["apply", mlp_model, "--placement", str(tmp / "not_a_device.json"), "--out", out],
        "split colocation": ["apply", mlp_model, "--placement", str(tmp / "split.json"), "--out", out],
        "placement not an object": ["apply", mlp_model, "--placement", str(tmp / "list.json"), "--out", out],
        "missing placement": ["apply", mlp_model, "--placement", str(tmp / "none.json"), "--out", out],
        "OUT is SOURCE": ["apply", mlp_model, "--placement", good, "--out", mlp_model],
        "worker memory in words": ["measure", mlp_model, "--cluster", "local:2,memory=lots"],
        "unknown local cluster option": ["profile", mlp_model, "--cluster", "local:2,cores=1"],
        "CPU index past the logical CPUs": ["apply", mlp_model, "--placement",
                                            str(tmp / "cpu_index.json"), "--out", out],
        "more logical CPUs than the bound": ["measure", mlp_model, "--devices", "100000"],
        "more local workers than cores": ["measure", mlp_model, "--cluster", "local:500"],
        "worker memory past any": ["measure", mlp_model, "--cluster", "local:1,memory=1e999GB"],
        "worker memory past the machine's": ["profile", mlp_model, "--cluster",
                                             "local:1,memory=1000TiB"],
        "worker threads past the bound": ["profile", mlp_model, "--cluster",
                                          "local:1,threads=100000"],
        "memory per device past any": ["place", mlp_model, "--simulate",
                                       "--memory-per-device", "1e999GB"],
        "placement nested 100,000 deep": ["apply", mlp_model, "--placement",
                                          str(tmp / "deep.json"), "--out", out],
        "a function that calls itself": ["inspect", str(tmp / "recursive.pbtxt")],
        "SOURCE that cannot be opened": ["inspect", str(tmp / "socket.pb")],
        "SOURCE that is a pipe": ["inspect", str(tmp / "pipe.pb")],
        "placement that is a pipe": ["apply", mlp_model, "--placement", str(tmp / "pipe.pb"),
                                     "--out", out],
    }


# A hand-made GraphDef, as a damaged or hostile file holds one: function "again" calls itself.
_CALLS_ITSELF = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "call" op: "PartitionedCall" input: "x"
       attr { key: "f" value { func { name: "again" } } } }
library { function {
  signature { name: "again" input_arg { name: "x" type: DT_FLOAT }
              output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "call" op: "PartitionedCall" input: "x"
             attr { key: "f" value { func { name: "again" } } } }
  ret { key: "y" value: "x" } } }
versions { producer: 1 }
"""


# Refused by the parser itself (tf_placeto.cli's argparse types).
@pytest.mark.parametrize("args, message", [
    (["apply", "m"], "the following arguments are required: --placement"),
    (["measure", "m", "--timeout", "-1"], "--timeout: must be a finite number of seconds"),
    (["measure", "m", "--timeout", "inf"], "--timeout: must be a finite number of seconds"),
    (["measure", "m", "--timeout", "nan"], "--timeout: must be a finite number of seconds"),
    (["measure", "m", "--time-budget", "0"], "--time-budget: must be a finite number"),
    (["measure", "m", "--timeout", "1e300"], "--timeout: must be a finite number of seconds "
                                             "above 0 and at most 2592000 (30 days), not 1e300"),
    (["measure", "m", "--time-budget", "1e9"], "--time-budget: must be a finite number"),
    (["measure", "m", "--warmup", "-1"], "--warmup: must be at least 0, not -1"),
    (["measure", "m", "--sessions", "0"], "--sessions: must be at least 1, not 0"),
    (["measure", "m", "--repeats", "2.5"], "--repeats"),
    (["profile", "m", "--runs", "0"], "--runs: must be at least 1, not 0"),
    (["profile", "m", "--calibrate", "-3"], "--calibrate: must be at least 0, not -3"),
    (["place", "m", "--max-groups", "0"], "--max-groups: must be at least 1, not 0"),
    (["inspect", "m", "--max-groups", "0"], "--max-groups: must be at least 1, not 0"),
    (["place", "m", "--seed", "-1"], "--seed: must be at least 0, not -1"),
    (["compare", "m", "--counts", "0", "--simulate"], "--counts: must be at least 1, not 0"),
    (["compare", "m", "--repeats", "0"], "--repeats: must be at least 1, not 0"),
    (["compare", "m", "--measure-best", "0"], "--measure-best: must be at least 1, not 0"),
    (["train", "--graphs", "m", "--counts", "2", "--out", "o", "--episodes", "0"],
     "--episodes: must be at least 1, not 0"),
    (["train", "--graphs", "m", "--counts", "2", "--out", "o", "--steps", "many"],
     "--steps: give a whole number, not 'many'"),
    (["compare", "m", "--simulate", "--counts", "2", "100000"],
     "--counts: must be at most 256 (devices like the profiled ones"),
    (["measure", "m", "--stream", "100000"],
     "--stream: must be at most 64 (each step in flight is a thread"),
])
def test_bad_numbers_are_refused_where_parsed_in_one_line(args, message, cli_here):
    code, error = cli_here(*args)
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1 and error.startswith("tf-placeto")


def test_debug_adds_the_traceback_to_bad_input_and_keeps_its_exit_code(tmp_path, cli_here):
    code, error = cli_here("--debug", "inspect", str(tmp_path / "missing"))
    assert code == 2 and error.startswith("Traceback"), error
    assert error.splitlines()[-1] == (f"tf-placeto: error: {tmp_path / 'missing'}: no such "
                                      "file or directory")


@pytest.mark.parametrize("raised, code, line", [
    (RuntimeFailure("a worker died"), 1, "tf-placeto: failed: a worker died"),
    (ValueError("a bug"), 1, "tf-placeto: failed: ValueError: a bug"),
    (KeyboardInterrupt(), 130, "tf-placeto: interrupted"),
])
def test_debug_keeps_every_exit_code(raised, code, line, cli_here, monkeypatch):
    """What a command raises, with its traceback: TensorFlow's log is on the terminal, so
    no log file is named."""
    from tf_placeto import cli

    def fails(args):
        raise raised

    monkeypatch.setattr(cli, "_inspect", fails)
    status, error = cli_here("--debug", "inspect", "examples:mlp")
    assert status == code and error.startswith("Traceback"), error
    assert error.splitlines()[-1] == line


# Through the real command, where TensorFlow's native log could reach the terminal: a
# SavedModel that does not parse and a placement that does not fit the graph.
AS_A_USER_RUNS_IT = ("truncated SavedModel", "unknown op")


def test_bad_input_gives_one_line_and_changes_nothing(mlp_model, inspected, tmp_path,
                                                      cli_here):
    cases = _bad_inputs(mlp_model, inspected, tmp_path)
    before = tree_digest(mlp_model)
    for label, args in cases.items():
        if label in AS_A_USER_RUNS_IT:
            result = run_cli(*args)
            code, error = result.returncode, result.stderr
        else:
            code, error = cli_here(*args)
        lines = error.splitlines()
        assert code == 2, (label, error)
        assert len(lines) == 1 and lines[0].startswith("tf-placeto"), (label, error)
        assert "Traceback" not in error
        assert not os.path.exists(tmp_path / "out"), label
        assert not own_workers(), label
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
    assert all(v >= 2.0 for v in profiled["remote_input_slowdowns"].values())
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
    # timed in turns: an interval on each median, the ratio to the first, and who ties whom
    assert all(r["interval"]["low"] <= r["step_time_s"] <= r["interval"]["high"]
               for r in results)
    assert results[0]["ratio_to_first"]["median"] == 1.0
    assert results[1]["ratio_to_first"]["low"] <= results[1]["ratio_to_first"]["high"]
    assert (files[1] in results[0]["indistinct_from"]) == (files[0] in
                                                          results[1]["indistinct_from"])
    simulated = json.loads(run_cli(*args, "--simulate").stdout)
    assert all(r["simulated"] and r["step_time_s"] > 0 for r in simulated)
    assert set(simulated[1]["busy_s"]) == {"/device:CPU:0", "/device:CPU:1"}
    assert simulated[1]["busy_s"]["/device:CPU:0"] < simulated[1]["busy_s"]["/device:CPU:1"]


def test_measure_on_a_local_cluster_in_two_sets_of_sessions(mlp_model, inspected, tmp_path):
    tasks = [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in range(2)]
    placement = _placement_file(inspected, tmp_path / "tasks.json", tasks)
    result = run_cli("measure", mlp_model, "--cluster", "local:2", "--placement", placement,
                     "--repeats", "4", "--sessions", "2", "--cache", str(tmp_path / "cache"),
                     "--json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assert row["label"] == placement and row["status"] == "ok"
    assert row["runs"] == 4                           # 2 rounds in each set, pooled


@pytest.mark.parametrize("args, message", [
    (["--devices", "2", "--cluster", "local:2"], "not both"),
    (["--repeats", "0"], "a count of at least 1 or auto, not '0'"),
    (["--cluster", "local:zero"], "local:N with N >= 1"),
    (["--cluster", '{"worker": ["nohost"]}'], "not an address"),
])
def test_measure_bad_input_gives_one_line(mlp_model, args, message, cli_here):
    code, error = cli_here("measure", mlp_model, *args)
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1


def test_measure_streams_steps_in_flight_for_real_and_simulated(mlp_model, tmp_path):
    """--stream K: seconds per step once K steps at a time are flowing, and steps/s."""
    args = ("measure", mlp_model, "--devices", "2", "--stream", "2", "--repeats", "3",
            "--cache", str(tmp_path / "cache"), "--json")
    for extra in ((), ("--simulate",)):
        result = run_cli(*args, *extra)
        assert result.returncode == 0, result.stderr
        [row] = json.loads(result.stdout)
        assert row["stream"] == 2 and row["status"] == "ok"
        assert row["steps_per_s"] == pytest.approx(1.0 / row["step_time_s"])
        assert row["simulated"] == bool(extra) and row["runs"] == (0 if extra else 3)
    table = run_cli(*args[:-1], "--simulate")
    assert "steps/s" in table.stdout
    traced = run_cli(*args[:-1], "--trace", str(tmp_path / "t"))
    assert traced.returncode == 2 and "a trace shows one step" in traced.stderr


def test_compare_simulated_writes_table_plot_and_csv(tmp_path):
    plot, table = tmp_path / "compare.png", tmp_path / "compare.csv"
    result = run_cli("compare", "examples:mlp", "--simulate", "--counts", "2", "4",
                     "--methods", "single,round_robin,m_etf", "--cache", str(tmp_path / "cache"),
                     "--max-groups", "8", "--json", "--plot", str(plot), "--csv", str(table))
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["devices"], r["method"]) for r in rows] == [
        (n, m) for n in (2, 4) for m in ("lower bound", "single", "round_robin", "m_etf")]
    assert all(r["step_s"] >= r["lower_bound_s"] for r in rows)
    assert plot.read_bytes()[:4] == b"\x89PNG" and "vs_best" in table.read_text()


def test_place_writes_the_model_and_its_placement_and_show_reads_it(mlp_model, tmp_path):
    out, cache, chart = tmp_path / "placed", str(tmp_path / "cache"), tmp_path / "gantt.png"
    result = run_cli("place", mlp_model, "--devices", "2", "--method", "heft", "--simulate",
                     "--out", str(out), "--cache", cache, "--max-groups", "8", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["method"] == "heft" and summary["devices"] == ["/device:CPU:0", "/device:CPU:1"]
    assert summary["predicted_after_s"] > 0 and summary["placement"] == f"{out}.placement.json"
    assert os.path.isfile(out / "saved_model.pb")
    placement = json.loads(open(summary["placement"]).read())
    shown = run_cli("show", str(out), "--devices", "2", "--cache", cache, "--gantt", str(chart),
                    "--json")
    assert shown.returncode == 0, shown.stderr
    devices = {row["device"]: row["ops"] for row in json.loads(shown.stdout)["devices"]}
    placed = {d: list(placement.values()).count(d) for d in devices}
    assert all(devices[d] >= placed[d] for d in devices)
    assert chart.read_bytes()[:4] == b"\x89PNG"
    assert "found a profile in the cache" in shown.stderr     # a placed copy: same profile


def test_place_for_throughput_predicts_a_stream(mlp_model, tmp_path):
    """--objective throughput: the placers follow it, and the prediction is a stream's."""
    result = run_cli("place", mlp_model, "--devices", "2", "--method", "m_etf", "--simulate",
                     "--objective", "throughput", "--stream", "2", "--max-groups", "8",
                     "--cache", str(tmp_path / "cache"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["objective"], summary["in_flight"]) == ("throughput", 2)
    assert summary["verdict"].startswith("throughput, 2 steps in flight: simulated only")
    assert summary["predicted_after_s"] > 0


@pytest.mark.parametrize("args, message", [
    (["place", "examples:mlp", "--method", "nope"], "unknown method 'nope'"),
    (["compare", "examples:mlp", "--methods", "single,nope", "--simulate"], "unknown method 'nope'"),
    (["compare", "examples:mlp", "--counts", "3"], "pass --simulate"),
    (["place", "examples:mlp", "--memory-per-device", "lots"], "memory per device 'lots'"),
    (["place", "examples:mlp", "--stream", "2"], "pass objective throughput"),
])
def test_placing_bad_input_gives_one_line(args, message, cli_here):
    code, error = cli_here(*args)
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1


def test_train_writes_a_policy_that_place_uses(mlp_model, tmp_path):
    out, cache = tmp_path / "policy", str(tmp_path / "cache")
    result = run_cli("train", "--graphs", mlp_model, "--counts", "2", "--out", str(out),
                     "--steps", "2", "--episodes", "2", "--start", "single", "fast",
                     "--imitate", "3", "--keep-imitating", "2",
                     "--imitate-exact", "5", "--imitate-climb", "2", "--link", "25:7600", "k80",
                     "--real-steps", "1", "--cache", cache)
    assert result.returncode == 0, result.stderr
    assert "after 3 epochs of imitation" in result.stdout
    assert "imitation teaches the decisions of" in result.stderr
    assert "trained 3 iterations on 3 problems from 2 starts each (single, fast)" \
        in result.stdout
    assert "1 iterations measured for real" in result.stdout
    assert (out / "policy" / "saved_model.pb").is_file()
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = json.loads((out / "training.json").read_text())
    assert len(log["iterations"]) == 3 and len(log["imitation"]) == 3
    assert log["config"]["keep_imitating"] == 2
    assert sum(log["imitation"][0]["taught"].values()) == 3     # problems, by whose decision
    real = log["iterations"][-1]
    assert real["problem"] == 2 and all(s > 0 for s in real["real_start_s"] + real["real_end_s"])
    assert real["link"] == "runtime" and real["devices"] == 2 and real["graph"] == mlp_model
    assert {row["start"] for row in log["iterations"]} <= {"single", "fast"}
    assert {row["link"] for row in log["iterations"][:2]} <= {"25:7600", "k80"}
    assert "by setting (imitated: iterations followed by imitation batches):" in result.stdout
    logged = [json.loads(line) for path in pathlib.Path(cache).rglob("observations.jsonl")
              for line in path.read_text().splitlines()]
    assert sum(o["origin"] == "train" for o in logged) >= 1
    placed = run_cli("place", mlp_model, "--cluster", "local:2", "--method", "placeto",
                     "--policy", str(out), "--start", "random", "--simulate", "--cache", cache,
                     "--json")
    assert placed.returncode == 0, placed.stderr
    summary = json.loads(placed.stdout)
    assert summary["predicted_after_s"] > 0 and summary["start"] == "random"
    assert 0 < summary["best_on_walk_step_s"] <= summary["policy_step_s"]


@pytest.mark.parametrize("args, message", [
    (["--counts", "1"], "--counts 1: a placement needs at least 2 devices"),
    (["--counts", "2", "--members", "5-2"], "--members '5-2': write A-B"),
    (["--counts", "2", "--steps", "0"], "--steps 0 trains nothing"),
    (["--counts", "2", "--imitate-exact", "5"], "--imitate-exact chooses what imitation"),
    (["--counts", "2", "--imitate-climb", "5"], "--imitate-climb chooses what imitation"),
    (["--counts", "2", "--keep-imitating-where", "one-device"],
     "--keep-imitating-where chooses when --keep-imitating imitates"),
    (["--counts", "2", "--link", "k80", "fast"], "link 'fast'"),
    (["--counts", "2", "--warm-start", "no/such/run"], "--warm-start no/such/run: not a training"),
])
def test_train_bad_input_gives_one_line(args, message, tmp_path, cli_here, monkeypatch):
    """Said before any runtime opens (a cluster would start and warm its links first)."""
    from tf_placeto import cli

    def no_runtime(*_, **__):
        raise AssertionError("a runtime opened before the input was checked")

    monkeypatch.setattr(cli, "open_runtime", no_runtime)
    code, error = cli_here("train", "--graphs", "examples:mlp", "--out", str(tmp_path / "p"),
                           *args)
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1


def test_place_by_default_keeps_the_best_of_placeto_and_the_algorithms(mlp_model, tmp_path):
    cache, logdir = str(tmp_path / "cache"), tmp_path / "tensorboard"
    result = run_cli("place", mlp_model, "--devices", "2", "--simulate", "--cache", cache,
                     "--max-groups", "8", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    from tf_placeto import methods

    assert summary["method"] == "auto" and summary["chosen"] in methods.candidates()
    tried = {name: summary[f"{name}_us"] for name in methods.candidates()}
    assert summary["predicted_after_s"] * 1e6 == pytest.approx(min(tried.values()))
    shown = run_cli("show", mlp_model, "--devices", "2", "--cache", cache,
                    "--tensorboard", str(logdir), "--json")
    assert shown.returncode == 0, shown.stderr
    import tensorflow as tf

    [event_file] = os.listdir(logdir)
    graphs = [event.graph_def for event in
              tf.compat.v1.train.summary_iterator(str(logdir / event_file)) if event.graph_def]
    graph_def = tf.compat.v1.GraphDef.FromString(graphs[0])
    shown_ops = sum(row["ops"] for row in json.loads(shown.stdout)["devices"])
    assert len(graph_def.node) == shown_ops and all(node.device for node in graph_def.node)


def test_compare_measures_only_the_best_predicted_and_the_single_device(tmp_path):
    result = run_cli("compare", "examples:mlp", "--cluster", "local:2", "--measure-best", "1",
                     "--methods", "single,round_robin,m_etf", "--repeats", "2",
                     "--cache", str(tmp_path / "cache"), "--max-groups", "8", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["method"]: r for r in json.loads(result.stdout)}
    measured = {m for m, r in rows.items() if r["runs"]}
    best_other = min((r["predicted_s"], m) for m, r in rows.items()
                     if m not in ("lower bound",) and r["status"] == "ok")[1]
    assert measured == {"single", best_other}
    for method in set(rows) - measured - {"lower bound"}:
        assert rows[method]["step_s"] is None and "not measured" in rows[method]["reason"]


def test_version_and_python_m_tf_placeto():
    from tests.helpers import REPO
    from tf_placeto import __version__

    assert run_cli("--version").stdout == f"tf-placeto {__version__}\n"
    result = subprocess.run([sys.executable, "-m", "tf_placeto", "--version"], cwd=REPO,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0 and result.stdout == f"tf-placeto {__version__}\n"


@pytest.mark.parametrize("command", ["inspect", "apply", "profile", "measure", "place", "show"])
def test_every_command_taking_a_source_takes_a_tag_set(command):
    assert "--tag-set TAGS" in run_cli(command, "--help").stdout


def test_a_tag_set_chooses_the_metagraph(two_tag_sets_model):
    def ops(*tag_set):
        result = run_cli("inspect", two_tag_sets_model, *tag_set, "--json")
        assert result.returncode == 0, result.stderr
        return {op for group in json.loads(result.stdout)["groups"] for op in group["ops"]}

    assert "z" in ops() and "z" not in ops("--tag-set", "train,gpu")
    result = run_cli("inspect", two_tag_sets_model, "--tag-set", "eval")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"tf-placeto: error: {two_tag_sets_model}: no MetaGraph with the tag set 'eval' "
        "(tag sets: train,gpu; serve); choose one with --tag-set"]


@pytest.fixture(scope="module")
def failing_model(tmp_path_factory):
    """A SavedModel that loads and imports fine, but whose step fails when it runs."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    path = str(tmp_path_factory.mktemp("failing") / "model")
    with tf.Graph().as_default(), tf1.Session() as session:
        x = tf1.placeholder(tf.float32, [4], name="x")
        y = tf.debugging.check_numerics(tf.math.log(x - 100.0), "boom", name="y")
        builder = tf1.saved_model.Builder(path)
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
            "serving_default": tf1.saved_model.predict_signature_def({"x": x}, {"y": y})})
        builder.save()
    return path


def test_measure_exits_1_when_nothing_could_be_measured_after_printing_the_rows(failing_model):
    result = run_cli("measure", failing_model, "--devices", "1", "--repeats", "1")
    assert result.returncode == 1, result.stderr
    assert "failed" in result.stdout and "InvalidArgumentError" in result.stdout
    assert ("tf-placeto: failed: nothing could be measured (see the reasons above)"
            in result.stderr.splitlines())


def test_a_failure_at_run_time_exits_1_and_keeps_tensorflows_log(failing_model, tmp_path):
    result = run_cli("profile", failing_model, "--devices", "1", "--cache", str(tmp_path))
    assert result.returncode == 1, result.stderr
    failed, log = result.stderr.splitlines()[-2:]
    assert failed.startswith("tf-placeto: failed: profiling on /device:CPU:0 failed: "
                             "InvalidArgumentError")
    path = log.removeprefix("tf-placeto: TensorFlow's log: ")
    assert path != log and os.path.isfile(path)
    os.remove(path)


def test_the_calibration_report_gives_single_steps_and_streams_their_own_figures():
    """A profile whose log holds streams beside single steps prints each kind's held-out
    figures on a line of its own (fitting.held_out ranks them apart)."""
    from tf_placeto import cli
    from tf_placeto.measure.costs.calibration import Calibration

    def figures(spearman, error):
        return {"spearman": spearman, "median_error": error}

    quality = {"calibrated": figures(0.9, 0.05), "uncalibrated": figures(0.5, 0.3),
               "runs": 40, "folds": 5, "streams": {"calibrated": figures(0.8, 0.09),
                                                   "uncalibrated": figures(0.4, 0.25),
                                                   "runs": 12}}
    lines = cli._calibration_report(Calibration(observations=40, quality=quality)).splitlines()
    assert lines[1].startswith("on single steps it was not fitted on (5-fold): Spearman 0.90")
    assert lines[2].startswith("on streams it was not fitted on (5-fold): Spearman 0.80, "
                               "median error 9%")
    alone = {key: value for key, value in quality.items() if key != "streams"}
    assert cli._calibration_report(Calibration(observations=40, quality=alone)).splitlines()[
        1].startswith("on runs it was not fitted on")


def _bad_outputs(mlp_model, tmp):
    """Output paths refused before any work, with what of the user's is in the way."""
    work = tmp / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the user's notes")
    (tmp / "mine.json").write_text('["not", "a placement"]')
    (tmp / "a_file").write_text("the user's")
    good = str(tmp / "good.json")
    (tmp / "good.json").write_text("{}")
    inside = os.path.join(mlp_model, "p.json")
    return {
        "apply --overwrite onto a folder of the user's":
            ["apply", mlp_model, "--placement", good, "--out", str(work), "--overwrite"],
        "place --overwrite onto a folder of the user's":
            ["place", mlp_model, "--simulate", "--out", str(work), "--overwrite"],
        "--placement-out inside SOURCE": ["place", mlp_model, "--simulate",
                                          "--placement-out", inside],
        "--placement-out onto a file of the user's": [
            "place", mlp_model, "--simulate", "--placement-out", str(tmp / "mine.json"),
            "--overwrite"],
        "--placement-out exists": ["place", mlp_model, "--simulate",
                                   "--placement-out", good],
        "--csv in a missing folder": ["compare", mlp_model, "--simulate", "--csv",
                                      str(tmp / "missing" / "t.csv")],
        "--plot in an unknown format": ["compare", mlp_model, "--simulate", "--plot",
                                        str(tmp / "plot.doc")],
        "--trace onto a file": ["measure", mlp_model, "--simulate", "--trace",
                                str(tmp / "a_file")],
        "--gantt inside SOURCE": ["show", mlp_model, "--gantt",
                                  os.path.join(mlp_model, "g.png")],
    }


def test_bad_output_paths_are_refused_before_any_work_and_nothing_is_lost(mlp_model, tmp_path,
                                                                           cli_here):
    cases = _bad_outputs(mlp_model, tmp_path)
    before = {path: tree_digest(str(path)) for path in tmp_path.iterdir()}
    source = tree_digest(mlp_model)
    for label, args in cases.items():
        code, error = cli_here(*args)
        assert code == 2, (label, error)
        assert len(error.splitlines()) == 1 and error.startswith("tf-placeto"), (label, error)
    assert {path: tree_digest(str(path)) for path in tmp_path.iterdir()} == before
    assert tree_digest(mlp_model) == source
