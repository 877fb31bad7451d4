"""Fault injection into the cache: every file cut short or filled with garbage is named in one
line, rebuilt, and the command gives the answer a fresh cache gives; figures are kept per
runtime; failures are never served as results; a log appended after a torn line keeps the
new record.

Profiling runs on a machine whose timings never vary (`steady`), so that an entry rebuilt
after damage must equal the fresh one exactly; real runs in turns stay real.
"""

import copy
import glob
import json
import logging
import os
import random
import shutil

import numpy as np
import pytest

import tf_placeto as tp
from tests.helpers import estimated_cost_model, round_robin
from tf_placeto.measure.profiling import fitting, link_timing, profiler
from tf_placeto.measure.costs.calibration import CALIBRATION_FILE, Calibration
from tf_placeto.measure.costs.costmodel import graph_fingerprint, graph_profile_directory
from tf_placeto.measure.evaluation.interleaved import measure_interleaved
from tf_placeto.measure.evaluation.journal import RoundJournal
from tf_placeto.measure.evaluation.measurer import (RESULTS_FILE, MeasureResult, RealMeasurer,
                                                    SimulatedMeasurer, stored_key)
from tf_placeto.measure.costs.messages import MESSAGES_FILE, TaskMessages
from tf_placeto.measure.runtimes.runner import FAILED, ModelRunner, StepRuns
from tf_placeto.measure.runtimes.runtime import Runtime, planned_runtime
from tf_placeto.records import append_record

CALIBRATION_RUNS = 8       # enough for a fit with held-out figures, in a few seconds
WORKERS = [f"/job:worker/replica:0/task:{k}/device:CPU:0" for k in (0, 1)]


def _first_answer(function, key):
    """`function` on a machine whose timings never vary: each call gives what the first call
    with the same `key(*args)` measured."""
    answers = {}

    def steady(*args):
        if key(*args) not in answers:
            answers[key(*args)] = function(*args)
        return copy.deepcopy(answers[key(*args)])
    return steady


@pytest.fixture(scope="module", autouse=True)
def steady():
    """Per-op costs and links measured once per graph and device(s), then given again; no
    kernel found slower with remote inputs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(profiler, "_op_costs", _first_answer(
            profiler._op_costs, lambda graph, runner, runtime, device, *_: (
                graph_fingerprint(graph), device)))
        patch.setattr(link_timing, "calibrate_links", _first_answer(
            link_timing.calibrate_links, lambda runtime, *_: tuple(runtime.device_names)))
        patch.setattr(profiler, "fit_remote_inputs", lambda *args: None)
        yield


@pytest.fixture(scope="module")
def fresh(graph, runtime, tmp_path_factory):
    """(a cache holding the graph's profile on two logical CPUs, calibrated on real runs;
    the answer it gives)."""
    cache = str(tmp_path_factory.mktemp("fresh"))
    made = profiler.profile(graph, runtime, cache=cache, runs=2,
                            calibration_runs=CALIBRATION_RUNS, calibration_budget_s=3.0)
    assert made.model.calibration is not None
    return cache, _answer(graph, made.model)


def _answer(graph, model) -> float:
    """What a user gets from a profile: the calibrated simulated step of a split."""
    devices = tp.DeviceSet.from_strings(model.meta["devices"])
    split = round_robin(tp.group(graph, max_groups=4))
    return SimulatedMeasurer.from_profile(graph, model, devices).evaluate([split])[0].step_time_s


def _cut_short(path):
    """The file ends half-way through its last line, as a write cut short leaves it."""
    with open(path, "rb") as file:
        data = file.read()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    with open(path, "wb") as file:
        file.write(data[: last + (len(data) - last) // 2])


def _garbage(path):
    """The file's bytes replaced by as many random ones."""
    with open(path, "rb+") as file:
        size = len(file.read())
        file.seek(0)
        file.write(random.Random(size).randbytes(size))


DAMAGES = [_cut_short, _garbage]


def _warnings(caplog) -> list:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


# Each cache file beside a profile: its path in the entry, and what names it once damaged.
BESIDE_THE_PROFILE = {
    "profile.json": "the cached profile at {entry} is damaged (profile.json",
    "ops.csv": "the cached profile at {entry} is damaged (ops.csv",
    "links.csv": "the cached profile at {entry} is damaged (links.csv",
    CALIBRATION_FILE: "the calibration at {entry}/calibration.json is damaged",
    fitting.OBSERVATIONS_FILE: "of {entry}/observations.jsonl; kept the rest",
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("name", list(BESIDE_THE_PROFILE))
def test_a_damaged_file_of_a_profile_is_named_rebuilt_and_gives_the_fresh_answer(
        graph, runtime, fresh, tmp_path, caplog, name, damage):
    made, answer = fresh
    cache = shutil.copytree(made, str(tmp_path / "cache"))
    entry = graph_profile_directory(graph, runtime.device_names, runtime.fingerprint, cache)
    damage(os.path.join(entry, name))
    with caplog.at_level(logging.WARNING):
        healed = profiler.profile(graph, runtime, cache=cache,
                                  calibration_runs=CALIBRATION_RUNS)
    [line] = _warnings(caplog)
    assert BESIDE_THE_PROFILE[name].format(entry=entry) in line
    assert _answer(graph, healed.model) == pytest.approx(answer, rel=1e-9)
    caplog.clear()
    again = profiler.profile(graph, runtime, cache=cache)       # rebuilt: found whole
    assert again.cached and not _warnings(caplog)
    assert _answer(graph, again.model) == pytest.approx(answer, rel=1e-9)


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_links_are_timed_again_not_copied_into_the_profile(graph, runtime, fresh,
                                                                   tmp_path, caplog, damage):
    """The links kept per runtime and the profile's copy, both damaged: the profile made
    again takes links timed anew."""
    made, answer = fresh
    cache = shutil.copytree(made, str(tmp_path / "cache"))
    entry = graph_profile_directory(graph, runtime.device_names, runtime.fingerprint, cache)
    [shared] = glob.glob(os.path.join(cache, "links", "*.csv"))
    damage(shared)
    damage(os.path.join(entry, "links.csv"))
    with caplog.at_level(logging.WARNING):
        healed = profiler.profile(graph, runtime, cache=cache,
                                  calibration_runs=CALIBRATION_RUNS)
    profile_line, links_line = _warnings(caplog)
    assert profile_line.startswith(f"the cached profile at {entry} is damaged (links.csv")
    assert links_line.startswith(f"the cached link calibration at {shared} is damaged")
    assert _answer(graph, healed.model) == pytest.approx(answer, rel=1e-9)
    assert link_timing._stored_links(shared, runtime.device_names) is not None


def test_measure_simulate_after_links_cut_short_succeeds_with_the_fresh_answer(
        mlp_model, graph, tmp_path, cli_here):
    """The reported failure: with the links cut short (the runtime's and the profile's
    copy), every later `measure --simulate` failed with "the profile has no link
    measurement", the first after saying the profile was damaged."""
    split = tmp_path / "split.json"
    split.write_text(json.dumps(round_robin(tp.group(graph, max_groups=4))))
    cache = str(tmp_path / "cache")

    def measure():
        result = cli_here("measure", mlp_model, "--devices", "2", "--simulate", "--json",
                          "--placement", str(split), "--cache", cache)
        code = result.returncode
        return code, json.loads(result.stdout)[0]["step_time_s"] if code == 0 else None, \
            result.stderr

    code, fresh_step, _ = measure()
    assert code == 0
    entry = graph_profile_directory(graph, *planned_runtime("2"), cache)
    for path in glob.glob(os.path.join(cache, "links", "*.csv")) + [f"{entry}/links.csv"]:
        with open(path, "rb+") as file:
            file.truncate(100)               # the first link whole, the second cut short
    code, step, err = measure()
    assert code == 0, err
    assert f"the cached profile at {entry} is damaged" in err
    assert "the cached link calibration at" in err and step == pytest.approx(fresh_step)
    code, step, err = measure()
    assert code == 0 and "damaged" not in err and step == pytest.approx(fresh_step)


def test_a_runtime_named_alike_gets_its_own_profile(mlp_model, graph, tmp_path, monkeypatch):
    """local:2 with other options, an existing cluster of two tasks: the same device names,
    other runtimes. A profile made on local:2 is found for it alone, starting no worker."""
    from tf_placeto.measure.runtimes import local as local_module

    def started(*args, **kwargs):
        raise AssertionError("a worker was started")

    monkeypatch.setattr(local_module.LocalCluster, "__init__", started)
    existing = json.dumps({"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]})
    specs = ["local:2", "local:2,threads=1", "local:2,memory=1GiB", existing]
    planned = [planned_runtime(cluster=spec) for spec in specs]
    assert all(names == WORKERS for names, _ in planned)
    entries = {graph_profile_directory(graph, *runtime, str(tmp_path)) for runtime in planned}
    assert len(entries) == len(specs)
    estimated_cost_model(graph).save(graph_profile_directory(graph, *planned[0], str(tmp_path)))
    assert tp.profile(mlp_model, tp.Target(cluster="local:2", cache=str(tmp_path))).cached
    for runtime in planned[1:]:
        assert profiler.cached_profile(graph, *runtime, str(tmp_path)) is None


def test_a_cache_made_on_another_machine_is_not_served(graph, runtime, fresh, monkeypatch):
    from tf_placeto.measure.runtimes import runtime as runtime_module

    made, _ = fresh
    here = runtime_module.machine_fingerprint()
    assert profiler.cached_profile(graph, *planned_runtime("2"), made) is not None
    monkeypatch.setattr(runtime_module, "machine_fingerprint",
                        lambda: {**here, "host": "elsewhere"})
    assert profiler.cached_profile(graph, *planned_runtime("2"), made) is None
    assert Runtime.local(tp.DeviceSet.local(2)).fingerprint != runtime.fingerprint


def _on(graph, device):
    return {op.name: device for op in graph.ops}


def test_a_failed_result_is_never_kept_nor_replayed(graph, runtime, tmp_path, monkeypatch):
    placement = _on(graph, "/device:CPU:1")
    full = tp.Placement(placement).validate(graph, tp.DeviceSet.local(2))
    key = f"{stored_key(graph, full)}-r2-w1"
    log = os.path.join(tmp_path, RESULTS_FILE)
    append_record(log, MeasureResult(key=key, status=FAILED,            # an older version's
                                     reason="worker task 1 died").to_json())
    [result] = RealMeasurer(graph, runtime, results_dir=str(tmp_path), repeats=2).evaluate(
        [placement])
    assert result.status == "ok" and result.runs == 2               # measured again
    with monkeypatch.context() as patch:
        patch.setattr(ModelRunner, "run", lambda *args, **kwargs: StepRuns(FAILED, "timeout"))
        moved = _on(graph, "/device:CPU:0")
        [failed] = RealMeasurer(graph, runtime, results_dir=str(tmp_path),
                                repeats=2).evaluate([moved])
    assert failed.status == "failed"
    statuses = [json.loads(line)["status"] for line in open(log)]
    assert statuses == ["failed", "ok"]                              # the new failure: not kept
    [again] = RealMeasurer(graph, runtime, results_dir=str(tmp_path), repeats=2).evaluate(
        [placement])
    assert again.step_time_s == result.step_time_s                  # ok: replayed


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_results_log_is_named_and_its_placements_measured_again(
        graph, runtime, tmp_path, caplog, damage):
    placement = _on(graph, "/device:CPU:1")
    log = os.path.join(tmp_path, RESULTS_FILE)
    RealMeasurer(graph, runtime, results_dir=str(tmp_path), repeats=2).evaluate([placement])
    damage(log)
    with caplog.at_level(logging.WARNING):
        [result] = RealMeasurer(graph, runtime, results_dir=str(tmp_path),
                                repeats=2).evaluate([placement])
    [line] = _warnings(caplog)
    assert line.endswith(f"of {log}; kept the rest")
    assert result.status == "ok" and result.runs == 2
    [kept] = [json.loads(line) for line in open(log)]                    # healed
    assert (kept["key"], kept["step_time_s"]) == (result.key, result.step_time_s)


def _kept_journal(graph, runtime, directory, monkeypatch, **options) -> str:
    """A measurement in turns cut short after its last round: its journal's path."""
    with monkeypatch.context() as patch:
        patch.setattr(RoundJournal, "finish", lambda self: None)
        measure_interleaved(graph, runtime, [None, _on(graph, "/device:CPU:1")], repeats=3,
                            trace=False, journal_dir=directory, **options)
    [journal] = glob.glob(os.path.join(directory, "in-turns", "*.jsonl"))
    return journal


def test_a_journal_resumes_only_the_same_timeout(graph, runtime, tmp_path, monkeypatch,
                                                 caplog):
    _kept_journal(graph, runtime, str(tmp_path), monkeypatch, timeout_s=600.0)
    caplog.set_level(logging.INFO, logger="tf_placeto")
    other = measure_interleaved(graph, runtime, [None, _on(graph, "/device:CPU:1")],
                                repeats=3, trace=False, journal_dir=str(tmp_path),
                                timeout_s=300.0)
    assert "resuming" not in caplog.text and [r.runs for r in other] == [3, 3]
    same = measure_interleaved(graph, runtime, [None, _on(graph, "/device:CPU:1")],
                               repeats=3, trace=False, journal_dir=str(tmp_path),
                               timeout_s=600.0)
    assert "cut short: 3 rounds" in caplog.text and [r.runs for r in same] == [3, 3]


def test_a_journal_replays_rounds_and_placements_out_of_memory_not_other_failures(
        graph, runtime, tmp_path, monkeypatch):
    placements = [None, _on(graph, "/device:CPU:1"), _on(graph, "/device:CPU:0")]
    with monkeypatch.context() as patch:
        patch.setattr(RoundJournal, "finish", lambda self: None)
        measure_interleaved(graph, runtime, placements, repeats=2, trace=False,
                            journal_dir=str(tmp_path))
    [path] = glob.glob(os.path.join(tmp_path, "in-turns", "*.jsonl"))
    rounds = [json.loads(line)["round"] for line in open(path)]
    with open(path, "w") as journal:        # as if 1 timed out and 2 ran out of memory at once
        for times in rounds:
            journal.write(json.dumps({"round": [times[0], None, None], "elapsed_s": 1.0}) + "\n")
        journal.write(json.dumps({"failed": 1, "status": "failed", "reason": "timed out"}) + "\n")
        journal.write(json.dumps({"failed": 2, "status": "infeasible", "reason": "OOM"}) + "\n")
    results = measure_interleaved(graph, runtime, placements, repeats=2, trace=False,
                                  journal_dir=str(tmp_path))
    assert [(r.status, r.reason) for r in results] == [("ok", ""), ("ok", ""),
                                                      ("infeasible", "OOM")]
    assert results[1].runs == 2 and not os.path.exists(path)


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_journal_is_named_and_the_measurement_completes(graph, runtime, tmp_path,
                                                                  monkeypatch, caplog, damage):
    journal = _kept_journal(graph, runtime, str(tmp_path), monkeypatch)
    damage(journal)
    with caplog.at_level(logging.WARNING):
        results = measure_interleaved(graph, runtime, [None, _on(graph, "/device:CPU:1")],
                                      repeats=3, trace=False, journal_dir=str(tmp_path))
    [line] = _warnings(caplog)
    assert line.endswith(f"of {journal}; kept the rest")
    assert [(r.status, r.runs) for r in results] == [("ok", 3), ("ok", 3)]


@pytest.mark.parametrize("damage", DAMAGES)
def test_damaged_message_counts_are_named_and_counted_again(graph, tmp_path, caplog, damage,
                                                            monkeypatch):
    assignments = [np.arange(len(graph.ops)) % 2, np.arange(len(graph.ops)) // 7 % 2]
    first = [TaskMessages(graph, WORKERS, str(tmp_path)).count(a) for a in assignments]
    path = os.path.join(tmp_path, MESSAGES_FILE)
    damage(path)
    optimized = []
    original = TaskMessages._optimized
    monkeypatch.setattr(TaskMessages, "_optimized",
                        lambda self, placement: optimized.append(1) or original(self, placement))
    with caplog.at_level(logging.WARNING):
        counted = [TaskMessages(graph, WORKERS, str(tmp_path)).count(a) for a in assignments]
    [line] = _warnings(caplog)
    assert line.endswith(f"of {path}; kept the rest")
    assert counted == first and 1 <= len(optimized) <= 2          # the lost ones, once each
    assert len(open(path).read().splitlines()) == 2


def test_an_append_after_a_torn_line_is_kept_in_every_log(graph, runtime, tmp_path):
    def torn(path):
        """Another process killed half-way through a line."""
        with open(path, "a") as file:
            file.write('{"a killed run wrote half a li')

    devices = tp.DeviceSet.from_strings(runtime.device_names)
    observations = str(tmp_path / "observations")
    done = MeasureResult(key="k", status="ok", step_time_s=0.002)
    fitting.record(observations, graph, devices, [None], [done], "measure")
    torn(os.path.join(observations, fitting.OBSERVATIONS_FILE))
    fitting.record(observations, graph, devices, [None], [done], "compare")
    assert [o.origin for o in fitting.read(observations, len(graph.ops))] == ["measure",
                                                                               "compare"]
    journal = RoundJournal(str(tmp_path), ["a", "b"], {"timeout_s": 600.0})
    journal.record_round([0.1, 0.2], 0.3)
    torn(journal.path)
    journal.record_round([0.4, 0.5], 0.9)
    assert journal.restore() == ([[0.1, 0.2], [0.4, 0.5]], {}, 0.9)
    results = str(tmp_path / "results")
    placements = [_on(graph, "/device:CPU:0"), _on(graph, "/device:CPU:1")]
    measurer = RealMeasurer(graph, runtime, results_dir=results, repeats=1)
    measurer.evaluate(placements[:1])
    torn(os.path.join(results, RESULTS_FILE))
    measurer.evaluate(placements[1:])
    assert len(RealMeasurer(graph, runtime, results_dir=results).known) == 2
    messages = str(tmp_path / "messages")
    counter = TaskMessages(graph, WORKERS, messages)
    counter.count(np.zeros(len(graph.ops), np.int64))
    torn(os.path.join(messages, MESSAGES_FILE))
    counter.count(np.ones(len(graph.ops), np.int64))
    assert len(TaskMessages(graph, WORKERS, messages)._counted) == 2


def test_a_calibration_of_another_shape_is_damaged_not_served(tmp_path, caplog):
    Calibration(copy_us=5.0).save(str(tmp_path))
    path = os.path.join(tmp_path, CALIBRATION_FILE)
    fields = json.load(open(path))
    json.dump({**fields, "copy_us": "fast"}, open(path, "w"))
    with caplog.at_level(logging.WARNING):
        assert Calibration.load(str(tmp_path)) is None
    assert f"the calibration at {path} is damaged (copy_us is 'fast'" in caplog.text
    assert not os.path.exists(path)
