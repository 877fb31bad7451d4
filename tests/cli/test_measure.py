"""tf-placeto measure: placements timed in turns or simulated, streams, bad input."""

import json

import pytest



def _placement_file(inspected, path, devices):
    path.write_text(json.dumps({op: devices[g["id"] % len(devices)]
                                for g in inspected["groups"] for op in g["ops"]}))
    return str(path)


def test_measure_runs_several_placements_and_simulates_them(mlp_model, inspected, tmp_path,
                                                            cli_here):
    cache = str(tmp_path / "cache")
    files = [_placement_file(inspected, tmp_path / "split.json",
                             ["/device:CPU:0", "/device:CPU:1"]),
             _placement_file(inspected, tmp_path / "one.json", ["/device:CPU:1"])]
    args = ["measure", mlp_model, "--devices", "2", "--cache", cache, "--json",
            "--placement", files[0], "--placement", files[1]]
    real = cli_here(*args, "--repeats", "3")
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
    simulated = json.loads(cli_here(*args, "--simulate").stdout)
    assert all(r["simulated"] and r["step_time_s"] > 0 for r in simulated)
    assert set(simulated[1]["busy_s"]) == {"/device:CPU:0", "/device:CPU:1"}
    assert simulated[1]["busy_s"]["/device:CPU:0"] < simulated[1]["busy_s"]["/device:CPU:1"]


def test_measure_on_a_local_cluster_in_two_sets_of_sessions(mlp_model, inspected, tmp_path,
                                                            cli_here):
    tasks = [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in range(2)]
    placement = _placement_file(inspected, tmp_path / "tasks.json", tasks)
    result = cli_here("measure", mlp_model, "--cluster", "local:2", "--placement", placement,
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
    result = cli_here("measure", mlp_model, *args)
    code, error = result.returncode, result.stderr
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1


def test_measure_streams_steps_in_flight_for_real_and_simulated(mlp_model, tmp_path, cli_here):
    """--stream K: seconds per step once K steps at a time are flowing, and steps/s."""
    args = ("measure", mlp_model, "--devices", "2", "--stream", "2", "--repeats", "3",
            "--cache", str(tmp_path / "cache"), "--json")
    for extra in ((), ("--simulate",)):
        result = cli_here(*args, *extra)
        assert result.returncode == 0, result.stderr
        [row] = json.loads(result.stdout)
        assert row["stream"] == 2 and row["status"] == "ok"
        assert row["steps_per_s"] == pytest.approx(1.0 / row["step_time_s"])
        assert row["simulated"] == bool(extra) and row["runs"] == (0 if extra else 3)
    table = cli_here(*args[:-1], "--simulate")
    assert "steps/s" in table.stdout
    traced = cli_here(*args[:-1], "--trace", str(tmp_path / "t"))
    assert traced.returncode == 2 and "a trace shows one step" in traced.stderr


def test_measure_exits_1_when_nothing_could_be_measured_after_printing_the_rows(failing_model,
                                                                                cli_here):
    result = cli_here("measure", failing_model, "--devices", "1", "--repeats", "1")
    assert result.returncode == 1, result.stderr
    assert "failed" in result.stdout and "InvalidArgumentError" in result.stdout
    assert ("tf-placeto: failed: nothing could be measured (see the reasons above)"
            in result.stderr.splitlines())
