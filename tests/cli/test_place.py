"""tf-placeto place (and show, which reads what it wrote): methods, objectives, bad input."""

import json
import os

import pytest



def test_place_writes_the_model_and_its_placement_and_show_reads_it(mlp_model, tmp_path, cli_here):
    out, cache, chart = tmp_path / "placed", str(tmp_path / "cache"), tmp_path / "gantt.png"
    result = cli_here("place", mlp_model, "--devices", "2", "--method", "heft", "--simulate",
                     "--out", str(out), "--cache", cache, "--max-groups", "8", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["method"] == "heft" and summary["devices"] == ["/device:CPU:0", "/device:CPU:1"]
    assert summary["predicted_after_s"] > 0 and summary["placement"] == f"{out}.placement.json"
    assert 0 <= summary["bound_saving"] < 1 and "split_cost_s" not in summary   # one process
    assert os.path.isfile(out / "saved_model.pb")
    placement = json.loads(open(summary["placement"]).read())
    shown = cli_here("show", str(out), "--devices", "2", "--cache", cache, "--gantt", str(chart),
                    "--json")
    assert shown.returncode == 0, shown.stderr
    devices = {row["device"]: row["ops"] for row in json.loads(shown.stdout)["devices"]}
    placed = {d: list(placement.values()).count(d) for d in devices}
    assert all(devices[d] >= placed[d] for d in devices)
    assert chart.read_bytes()[:4] == b"\x89PNG"
    assert "found a profile in the cache" in shown.stderr     # a placed copy: same profile


def test_place_for_throughput_predicts_a_stream(mlp_model, tmp_path, cli_here):
    """--objective throughput: the placers follow it, and the prediction is a stream's; the
    pipeline split of method dp too, with its own flag."""
    result = cli_here("place", mlp_model, "--devices", "2", "--method", "m_etf", "--simulate",
                     "--objective", "throughput", "--stream", "2", "--max-groups", "8",
                     "--cache", str(tmp_path / "cache"), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["objective"], summary["in_flight"]) == ("throughput", 2)
    assert summary["verdict"].startswith("throughput, 2 steps in flight: simulated only")
    assert summary["predicted_after_s"] > 0
    piped = cli_here("place", mlp_model, "--devices", "2", "--method", "dp", "--simulate",
                     "--objective", "throughput", "--stream", "2", "--max-groups", "8",
                     "--max-ideals", "100", "--cache", str(tmp_path / "cache"), "--json")
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["predicted_after_s"] > 0


@pytest.mark.parametrize("args, message", [
    (["place", "examples:mlp", "--method", "nope"], "unknown method 'nope'"),
    (["compare", "examples:mlp", "--methods", "single,nope", "--simulate"],
     "unknown method 'nope'"),
    (["compare", "examples:mlp", "--counts", "3"], "pass --simulate"),
    (["place", "examples:mlp", "--memory-per-device", "lots"], "memory per device 'lots'"),
    (["place", "examples:mlp", "--stream", "2"], "pass objective throughput"),
])
def test_placing_bad_input_gives_one_line(args, message, cli_here):
    result = cli_here(*args)
    code, error = result.returncode, result.stderr
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1


def test_place_by_default_keeps_the_best_of_placeto_and_the_algorithms(mlp_model, tmp_path,
                                                                       cli_here):
    cache, logdir = str(tmp_path / "cache"), tmp_path / "tensorboard"
    result = cli_here("place", mlp_model, "--devices", "2", "--simulate", "--cache", cache,
                     "--max-groups", "8", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    from tf_placeto import methods

    assert summary["method"] == "auto" and summary["chosen"] in methods.candidates()
    tried = {name: summary[f"{name}_us"] for name in methods.candidates()}
    assert summary["predicted_after_s"] * 1e6 == pytest.approx(min(tried.values()))
    shown = cli_here("show", mlp_model, "--devices", "2", "--cache", cache,
                    "--tensorboard", str(logdir), "--json")
    assert shown.returncode == 0, shown.stderr
    import tensorflow as tf

    [event_file] = os.listdir(logdir)
    graphs = [event.graph_def for event in
              tf.compat.v1.train.summary_iterator(str(logdir / event_file)) if event.graph_def]
    graph_def = tf.compat.v1.GraphDef.FromString(graphs[0])
    shown_ops = sum(row["ops"] for row in json.loads(shown.stdout)["devices"])
    assert len(graph_def.node) == shown_ops and all(node.device for node in graph_def.node)
