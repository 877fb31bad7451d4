"""Chrome traces of one step: simulated and really traced ones load as JSON and name the same
devices, each op on the device its placement gave it."""

import json

import pytest

import tf_placeto as tp
from tests.helpers import round_robin

DEVICES = ["/device:CPU:0", "/device:CPU:1"]


@pytest.fixture(scope="module")
def placement(graph):
    """Groups in turn on both devices, colocated ops included (as the measurers see it)."""
    groups = tp.group(graph, max_groups=6)
    return tp.Placement(round_robin(groups)).validate(graph, tp.DeviceSet.from_strings(DEVICES))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One profile and results log for the module's tests."""
    return str(tmp_path_factory.mktemp("cache"))


def _spans(path, placement) -> list:
    """The trace's spans, checked: loads, its processes are the devices (pid = their order),
    each device has spans, no span goes back in time, an op's span is on its placed device."""
    with open(path, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == dict(enumerate(DEVICES))
    spans = [e for e in events if e["ph"] == "X"]
    assert {processes[e["pid"]] for e in spans} == set(DEVICES)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in spans)
    assert all(processes[e["pid"]] == placement[e["name"]] for e in spans
               if e["name"] in placement)
    return spans


def test_simulated_and_real_traces_name_devices_and_ops_alike(mlp_model, graph, placement,
                                                              cache, tmp_path):
    labels, target = ["runs/round robin.json"], tp.Target(devices="2", cache=cache)
    tp.measure_steps(mlp_model, [placement], labels, target, simulate=True,
                     trace=str(tmp_path / "simulated"))
    [real] = tp.measure_steps(mlp_model, [placement], labels, target,
                              timing=tp.Timing(repeats=1, warmup=0), trace=str(tmp_path / "real"))
    assert real.status == "ok" and real.trace is not None and "trace" not in real.to_json()
    simulated = [e for e in _spans(tmp_path / "simulated" / "round_robin.json", placement)
                 if e["cat"] == "op"]
    assert sorted(e["name"] for e in simulated) == sorted(op.name for op in graph.ops)
    types = {op.name: op.type for op in graph.ops}
    assert all(e["args"]["op"] == types[e["name"]] for e in simulated)
    ran = [e for e in _spans(tmp_path / "real" / "round_robin.json", placement)
           if e["cat"] == "Op"]
    # TensorFlow adds nodes of its own (_SOURCE, _Arg, Func/... identities) beside the graph's,
    # and Grappler fuses some of them into one kernel named after a member
    assert sum(e["name"] in types for e in ran) >= len(ran) / 2


def test_show_writes_the_simulated_trace(mlp_model, placement, cache, tmp_path, cli_here):
    placement.to_json(str(tmp_path / "placement.json"))
    trace = tmp_path / "show.json"
    shown = cli_here("show", mlp_model, "--devices", "2", "--cache", cache,
                    "--placement", str(tmp_path / "placement.json"), "--trace", str(trace))
    assert shown.returncode == 0, shown.stderr
    assert f"wrote the trace: {trace}" in shown.stdout
    spans = _spans(trace, placement)
    assert {"op", "transfer"} <= {e["cat"] for e in spans}


def test_measure_writes_a_traced_run_per_placement(mlp_model, placement, cache, tmp_path, cli_here):
    placement.to_json(str(tmp_path / "split.json"))
    traces = tmp_path / "traces"
    measured = cli_here("measure", mlp_model, "--devices", "2", "--cache", cache, "--repeats", "1",
                       "--placement", str(tmp_path / "split.json"), "--trace", str(traces))
    assert measured.returncode == 0, measured.stderr
    assert [p.name for p in traces.iterdir()] == ["split.json"]
    assert any(e["cat"] == "Op" for e in _spans(traces / "split.json", placement))
