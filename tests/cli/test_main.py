"""The tf-placeto command as a user meets it: exit codes, --debug, bad input and output
paths refused in one line before any work, the version, `python -m tf_placeto`."""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.helpers import own_workers, run_cli, tree_digest
from tf_placeto.errors import RuntimeFailure
from tf_placeto.graph.sources import load_source as tp_load


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

    def applying(name):
        return ["apply", mlp_model, "--placement", str(tmp / name), "--out", out]

    return {
        "missing path": ["inspect", str(tmp / "missing")],
        "truncated .pb": ["inspect", str(tmp / "truncated.pb")],
        "empty file": ["inspect", str(tmp / "empty.pb")],
        "cut at a node boundary": ["inspect", str(tmp / "cut_at_node.pb")],
        "negative device index": applying("negative.json"),
        "placement is a directory": applying("not_a_model"),
        "truncated SavedModel": ["inspect", str(truncated_dir)],
        "not a SavedModel": ["inspect", str(tmp / "not_a_model")],
        "unknown signature": ["inspect", mlp_model, "--signature", "nope"],
        "unknown example": ["inspect", "examples:nope"],
        "unknown op": applying("unknown_op.json"),
        "unknown device": applying("unknown_device.json"),
        "not a device": applying("not_a_device.json"),
        "split colocation": applying("split.json"),
        "placement not an object": applying("list.json"),
        "missing placement": applying("none.json"),
        "OUT is SOURCE": ["apply", mlp_model, "--placement", good, "--out", mlp_model],
        "worker memory in words": ["measure", mlp_model, "--cluster", "local:2,memory=lots"],
        "unknown local cluster option": ["profile", mlp_model, "--cluster", "local:2,cores=1"],
        "CPU index past the logical CPUs": applying("cpu_index.json"),
        "more logical CPUs than the bound": ["measure", mlp_model, "--devices", "100000"],
        "more local workers than cores": ["measure", mlp_model, "--cluster", "local:500"],
        "worker memory past any": ["measure", mlp_model, "--cluster", "local:1,memory=1e999GB"],
        "worker memory past the machine's": ["profile", mlp_model, "--cluster",
                                             "local:1,memory=1000TiB"],
        "worker threads past the bound": ["profile", mlp_model, "--cluster",
                                          "local:1,threads=100000"],
        "memory per device past any": ["place", mlp_model, "--simulate",
                                       "--memory-per-device", "1e999GB"],
        "placement nested 100,000 deep": applying("deep.json"),
        "a function that calls itself": ["inspect", str(tmp / "recursive.pbtxt")],
        "SOURCE that cannot be opened": ["inspect", str(tmp / "socket.pb")],
        "SOURCE that is a pipe": ["inspect", str(tmp / "pipe.pb")],
        "placement that is a pipe": applying("pipe.pb"),
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


def test_debug_adds_the_traceback_to_bad_input_and_keeps_its_exit_code(tmp_path, cli_here):
    result = cli_here("--debug", "inspect", str(tmp_path / "missing"))
    code, error = result.returncode, result.stderr
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
    from tf_placeto.cli import inspect

    def fails(args):
        raise raised

    monkeypatch.setattr(inspect, "run", fails)
    result = cli_here("--debug", "inspect", "examples:mlp")
    status, error = result.returncode, result.stderr
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
        result = run_cli(*args) if label in AS_A_USER_RUNS_IT else cli_here(*args)
        code, error = result.returncode, result.stderr
        lines = error.splitlines()
        assert code == 2, (label, error)
        assert len(lines) == 1 and lines[0].startswith("tf-placeto"), (label, error)
        assert "Traceback" not in error
        assert not os.path.exists(tmp_path / "out"), label
        assert not own_workers(), label
    assert tree_digest(mlp_model) == before


def test_version_and_python_m_tf_placeto():
    from tests.helpers import REPO
    from tf_placeto import __version__

    assert run_cli("--version").stdout == f"tf-placeto {__version__}\n"
    result = subprocess.run([sys.executable, "-m", "tf_placeto", "--version"], cwd=REPO,
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0 and result.stdout == f"tf-placeto {__version__}\n"


def test_a_failure_at_run_time_exits_1_and_keeps_tensorflows_log(failing_model, tmp_path):
    result = run_cli("profile", failing_model, "--devices", "1", "--cache", str(tmp_path))
    assert result.returncode == 1, result.stderr
    failed, log = result.stderr.splitlines()[-2:]
    assert failed.startswith("tf-placeto: failed: profiling on /device:CPU:0 failed: "
                             "InvalidArgumentError")
    path = log.removeprefix("tf-placeto: TensorFlow's log: ")
    assert path != log and os.path.isfile(path)
    os.remove(path)


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
        result = cli_here(*args)
        code, error = result.returncode, result.stderr
        assert code == 2, (label, error)
        assert len(error.splitlines()) == 1 and error.startswith("tf-placeto"), (label, error)
    assert {path: tree_digest(str(path)) for path in tmp_path.iterdir()} == before
    assert tree_digest(mlp_model) == source
