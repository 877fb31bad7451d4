"""The scoreboard: every placer on real graphs, simulated and measured, with honest ratios."""

import pytest

import tf_placeto as tp
from tf_placeto import methods
from tf_placeto.compare import LOWER_BOUND, RealRuns, compare, printable
from tf_placeto.measure.profiling import fitting
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.plots import comparison_plot, gantt
from tf_placeto.workload import MemoryLimit, load_workload

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runtime():
    return Runtime.local(tp.DeviceSet.local(2))


@pytest.fixture(scope="module")
def workload(small_cnn_model, runtime, tmp_path_factory):
    return load_workload(small_cnn_model, runtime, max_groups=16,
                         cache=str(tmp_path_factory.mktemp("profiles")))


@pytest.fixture(scope="module")
def simulated(workload):
    return compare([workload], [2, 3], methods.names(),
                   options={"rnn_budget": 16})      # its default 400: 5 s a count


def test_every_method_and_the_bound_for_each_device_count(simulated):
    assert len(simulated) == 2 * (len(methods.names()) + 1)
    for count in (2, 3):
        rows = simulated[simulated["devices"] == count]
        assert list(rows["method"]) == [LOWER_BOUND] + methods.names()
    placed = simulated[simulated["method"] != LOWER_BOUND]
    assert (placed["status"] == "ok").all() and (placed["decide_s"] >= 0).all()
    assert (placed["step_s"] >= placed["lower_bound_s"]).all()
    assert (placed["vs_lower_bound"] >= 1).all()


def test_ratios_are_to_the_best_method(simulated):
    methods = simulated[simulated["method"] != LOWER_BOUND]
    for _, rows in methods.groupby("devices"):
        assert rows["vs_best"].min() == pytest.approx(1.0)
        single = rows[rows["method"] == "single"]["step_s"].item()
        assert rows["step_s"].min() <= single


def test_a_memory_limit_shows_who_finds_a_placement(workload):
    table = compare([workload], [2], ["single", "m_topo", "m_etf", "metis"],
                    memory=MemoryLimit(fraction=0.8))
    status = dict(zip(table["method"], table["status"]))
    assert status["single"] == "infeasible"
    assert "ok" in {status["m_topo"], status["m_etf"], status["metis"]}
    limit = table["memory_limit_bytes"].iloc[0]
    feasible = table[table["status"] == "ok"]
    assert (feasible["peak_memory_bytes"] <= limit).all()


def test_real_runs_give_medians_with_spread_and_are_logged_for_the_fit(workload, runtime):
    logged = fitting.read(workload.profile_dir, len(workload.graph.ops))
    table = compare([workload], [None], ["single", "round_robin"],
                    real=RealRuns(runtime, repeats=2))
    measured = table[table["method"] != LOWER_BOUND]
    assert (measured["runs"] == 2).all() and (measured["status"] == "ok").all()
    assert (measured["spread_s"] >= 0).all() and (measured["predicted_s"] > 0).all()
    assert "spread (ms)" in printable(table)
    added = fitting.read(workload.profile_dir, len(workload.graph.ops))[len(logged):]
    assert [o.label for o in added] == ["single", "round_robin"]
    assert {o.origin for o in added} == {"compare"} and len({o.session for o in added}) == 1
    assert [o.step_s for o in added] == list(measured["step_s"])


def test_pictures_are_written(simulated, workload, tmp_path):
    plot = comparison_plot(simulated, str(tmp_path / "compare.png"))
    assert open(plot, "rb").read(8) == PNG
    problem = workload.problem(2)
    decision = methods.place("m_etf", problem).group_devices
    schedule = problem.simulate(decision, schedule=True).schedule
    chart = gantt(schedule, str(tmp_path / "gantt.png"), title="m_etf")
    assert open(chart, "rb").read(8) == PNG


def test_a_placer_that_fails_fails_its_row_only(workload, tmp_path):
    table = compare([workload], [2], ["single", "placeto"], options={"policy": str(tmp_path)})
    status = dict(zip(table["method"], table["status"]))
    assert status["single"] == "ok" and status["placeto"] == "failed"
    reason = table[table["method"] == "placeto"]["reason"].item()
    assert "not a trained policy" in reason


def test_the_exact_placer_is_every_rows_reference(workload):
    table = compare([workload], [2], ["single", "m_etf", "rnn", "optimal"],
                    options={"time_limit": 5.0, "rnn_budget": 40})
    rows = table.set_index("method")
    assert rows.loc["optimal", "vs_optimal"] == pytest.approx(1.0)
    assert (rows.loc[["single", "m_etf", "rnn"], "vs_optimal"] >= 1 - 1e-9).all()
    assert rows.loc["rnn", "evaluations"] == 40
    assert 1 <= rows.loc["rnn", "evaluations_to_5pct"] <= 40
    assert "x optimal" in printable(table) and "evals to 5%" in printable(table)


def test_under_throughput_rows_are_streams_against_the_stream_bound(workload):
    """Each row is its decision's simulated seconds per step with two steps in flight, and
    the bound is the stream's."""
    table = compare([workload], [2], ["single", "m_etf", "heft", "metis"],
                    objective="throughput", in_flight=2)
    streaming = workload.problem(2).with_objective("throughput", 2)
    rows = table.set_index("method")
    assert rows.loc[LOWER_BOUND, "step_s"] == pytest.approx(streaming.lower_bound_us() / 1e6)
    for method in ("single", "m_etf", "heft", "metis"):
        decision = table.attrs["group_devices"][(workload.name, 2, method)]
        assert rows.loc[method, "step_s"] == pytest.approx(
            streaming.evaluate(decision).us_per_step / 1e6)
        assert rows.loc[method, "step_s"] >= rows.loc[LOWER_BOUND, "step_s"]
    assert list(rows.loc[["single", "m_etf", "heft", "metis"], "follows_objective"]) == [
        False, True, True, False]
    assert "per step, 2 in flight" in printable(table) and "follows objective" in printable(table)


def test_real_throughput_runs_streams_and_logs_them_for_the_fit(workload, runtime):
    logged = fitting.read(workload.profile_dir, len(workload.graph.ops))
    table = compare([workload], [None], ["single", "round_robin"],
                    real=RealRuns(runtime, repeats=2), objective="throughput", in_flight=2)
    measured = table[table["method"] != LOWER_BOUND]
    assert (measured["status"] == "ok").all() and (measured["runs"] == 2).all()
    assert (measured["step_s"] > 0).all()
    added = fitting.read(workload.profile_dir, len(workload.graph.ops))[len(logged):]
    assert len(added) == len(measured) and all(o.in_flight == 2 for o in added)
    assert sorted(o.step_s for o in added) == pytest.approx(sorted(measured["step_s"]))
