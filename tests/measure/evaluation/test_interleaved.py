"""Placements timed in turns: every result with its interval and ratio, a worker that dies
mid-round ends only the placement whose step it was running, and a command killed half-way
keeps the rounds it timed."""

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import tf_placeto as tp
from tests.helpers import REPO, kill_later, spinner_model, two_buffers_model
from tf_placeto.measure.runtimes.local import LocalCluster, _data_memory_bytes
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.runtimes.runner import ModelRunner
from tf_placeto.measure.runtimes.runtime import Runtime


def test_placements_in_turns_get_intervals_and_ratios_to_the_first(mlp_model):
    graph = tp.import_graph(mlp_model)
    on = [{op.name: f"/device:CPU:{k}" for op in graph.ops} for k in (0, 1)]
    results = measure_interleaved(graph, Runtime.local(tp.DeviceSet.local(2)),
                                  [None, *on], ["as written", "cpu0", "cpu1"], repeats=6)
    assert [r.status for r in results] == ["ok"] * 3 and all(r.runs == 6 for r in results)
    for result in results:
        assert result.interval["low"] <= result.step_time_s <= result.interval["high"]
        assert result.ratio_to_first["low"] <= result.ratio_to_first["median"] \
            <= result.ratio_to_first["high"]
        assert result.peak_memory_bytes and result.trace is not None
    assert results[0].ratio_to_first["median"] == 1.0          # the first, against itself


def test_sets_of_new_sessions_pool_their_rounds(mlp_model, monkeypatch):
    graph = tp.import_graph(mlp_model)
    on = {op.name: "/device:CPU:1" for op in graph.ops}
    opened = []
    session = ModelRunner.session

    def counted(self, runtime, placement=None, timeout_s=600.0):
        opened.append(placement is not None)
        return session(self, runtime, placement, timeout_s)

    monkeypatch.setattr(ModelRunner, "session", counted)
    results = measure_interleaved(graph, Runtime.local(tp.DeviceSet.local(2)), [None, on],
                                  repeats=7, sessions=3, trace=False)
    assert opened == [False, True] * 3                 # each placement loaded anew per set
    assert [r.status for r in results] == ["ok"] * 2
    assert all(r.runs == 7 for r in results)           # 3 + 2 + 2 rounds, pooled
    assert results[1].ratio_to_first["low"] <= results[1].ratio_to_first["high"]
    # "auto": the first set decides how many rounds a set runs, and the second runs as many
    opened.clear()
    auto = measure_interleaved(graph, Runtime.local(tp.DeviceSet.local(2)), [None, on],
                               budget_s=1.0, sessions=2, trace=False)
    assert opened == [False, True] * 2
    assert auto[0].runs == auto[1].runs and auto[0].runs % 2 == 0 and auto[0].runs >= 4


def test_a_dead_master_ends_one_placement_and_the_others_are_measured(tmp_path, cluster):
    spin = tp.import_graph(spinner_model(str(tmp_path / "spinner"), iterations=50_000))
    placements = [None] + [{op.name: device for op in spin.ops}
                           for device in cluster.device_names]
    doomed = cluster.pids[0]
    start = time.monotonic()
    # loading three sessions and 15 rounds of 0.1 s steps outlast 2 s; a kill while one
    # loads ends that placement alike
    killer, killed_at = kill_later(doomed, 2.0)
    try:
        results = measure_interleaved(spin, Runtime.on_cluster(cluster), placements,
                                      repeats=15, timeout_s=600, trace=False)
    finally:
        killer.cancel()
    assert killed_at and time.monotonic() - start < 90      # not the 600 s timeout
    failed = [r for r in results if r.status == "failed"]
    assert len(failed) == 1, [(r.status, r.reason) for r in results]
    assert re.match(r"worker task 0 \(127\.0\.0\.1:\d+\) died during the step: process "
                    r"killed by SIGKILL", failed[0].reason), failed[0].reason
    measured = [r for r in results if r.status == "ok"]
    assert len(measured) == 2 and all(r.runs == 15 for r in measured)
    assert cluster.alive() == [True, True] and cluster.pids[0] != doomed


def test_a_placement_out_of_memory_is_an_infeasible_row_and_the_others_are_measured(tmp_path):
    floats = 2**27                                   # 512 MiB a buffer
    graph = tp.import_graph(two_buffers_model(str(tmp_path / "buffers"), floats))
    with LocalCluster(1) as probe:                   # a worker that has run nothing yet
        at_rest = _data_memory_bytes(probe.pids[0])
    # room for 1.75 buffers on top of a worker at rest: one on each device fits, two on one not
    with LocalCluster(2, memory_limit_bytes=at_rest + 7 * floats) as cluster:
        first, second = cluster.device_names
        together = {op.name: first for op in graph.ops}
        apart = {op.name: second if "/right" in op.name else first for op in graph.ops}
        results = measure_interleaved(graph, Runtime.on_cluster(cluster), [together, apart],
                                      ["together", "apart"], repeats=3)
        assert cluster.alive() == [True, True]
    assert results[0].status == "infeasible"
    assert results[0].reason.startswith(f"out of memory on {first}: OOM when allocating tensor "
                                        f"with shape[{floats}]"), results[0].reason
    assert results[1].status == "ok" and results[1].runs == 3
    assert min(results[1].peak_memory_bytes.values()) >= 4 * floats


def test_a_killed_measurement_keeps_its_rounds_and_the_same_command_resumes(tmp_path):
    spin = spinner_model(str(tmp_path / "spinner"), iterations=25_000)    # about 0.1 s
    graph = tp.import_graph(spin)
    files = [tmp_path / f"on_{k}.json" for k in (0, 1)]
    for k, file in enumerate(files):
        file.write_text(json.dumps({op.name: f"/device:CPU:{k}" for op in graph.ops}))
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "tf_placeto.cli", "measure", spin, "--devices", "2",
               "--placement", str(files[0]), "--placement", str(files[1]), "--repeats", "12",
               "--cache", str(cache), "--json"]
    env = {**os.environ, "PYTHONPATH": REPO}
    first = subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    kept = []
    try:
        deadline = time.monotonic() + 120
        while len(kept) < 3 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            journals = glob.glob(str(cache / "**" / "in-turns" / "*.jsonl"), recursive=True)
            if journals:
                with open(journals[0]) as journal:
                    kept = [json.loads(line)["round"] for line in journal if line.endswith("\n")]
        first.send_signal(signal.SIGKILL)
    finally:
        first.wait()
    assert first.returncode == -signal.SIGKILL and len(kept) >= 3, "it was not cut short"
    again = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    rounds = int(re.search(r"resuming a measurement in turns that was cut short: (\d+) rounds",
                           again.stderr).group(1))
    assert 3 <= rounds < 12
    results = json.loads(again.stdout)
    assert [r["runs"] for r in results] == [12, 12] and all(r["status"] == "ok" for r in results)
    assert min(r["min_s"] for r in results) <= min(min(k) for k in kept)
    assert not glob.glob(str(cache / "**" / "in-turns" / "*.jsonl"), recursive=True)  # done
