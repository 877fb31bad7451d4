"""The runnable scripts of examples/: each of the three uses, and the demo, on small models."""

import os
import subprocess
import sys

from tests.helpers import REPO
from tf_placeto import methods


def run_script(module: str, *args: str) -> str:
    """Run `python -m module` as a user would (Keras 3, no legacy Keras); its output."""
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("TF_USE_LEGACY_KERAS", None)
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                            text=True, env=env, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def test_optimize_step_places_a_keras_step_and_trains_with_it(tmp_path):
    out = run_script("examples.optimize_step", "--steps", "4", "--cache", str(tmp_path))
    assert "/device:CPU:0" in out and "/device:CPU:1" in out
    assert "measured_after_s" in out and "training with the placed step, loss:" in out


def test_place_saved_model_serves_from_plain_tensorflow(tmp_path):
    out = run_script("examples.place_saved_model", "--out", str(tmp_path / "regression"),
                     "--method", "m_topo")      # a fast placer that splits: 27 s, auto 43 s
    assert "loss from the placed SavedModel:" in out
    assert "device:CPU:1" in out.split("ops per device in its functions:")[1]


def test_measure_on_cluster_times_the_step_before_and_after(tmp_path):
    out = run_script("examples.measure_on_cluster", "--example", "mlp",   # m_topo splits it
                     "--method", "m_topo", "--out", str(tmp_path / "measured"))  # 19 s, auto 66
    measured = [line for line in out.splitlines() if ": ok, median step" in line]
    assert measured[0].startswith("as written:") and len(measured) >= 2   # and candidates
    if "nothing was written" in out:
        assert out.rstrip().endswith("nothing was written to " + str(tmp_path / "measured"))
        assert not (tmp_path / "measured").exists()
    else:                                    # the written placement, timed again in turns
        timed = out[out.index("timed again in turns"):].splitlines()
        assert any(line.split()[:3] == ["as", "written", "ok"] for line in timed)
        assert (tmp_path / "measured" / "saved_model.pb").is_file()


def test_demo_places_as_place_does_then_shows_the_scoreboard_and_pictures(tmp_path):
    """The demo goes through `tf_placeto.place`: its verdict (measured for real, in turns)
    first, then every method on the scoreboard, then the pictures; a placed SavedModel only
    where the verdict says a placement won."""
    out = run_script("examples.demo", "--example", "mlp", "--out", str(tmp_path))
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    assert out.index(verdict) < out.index("measured in turns, median step: as written ")
    table = out[out.index("the scoreboard"):]
    for method in methods.names():
        assert f" {method} " in table, method
    for name in ("comparison.png", "gantt.png", "comparison.csv"):
        assert (tmp_path / name).is_file(), name
    written = (tmp_path / "mlp_placed" / "saved_model.pb").is_file()
    assert written == (" is faster than the graph as written: " in verdict)
    assert written == (tmp_path / "mlp_placed.placement.json").is_file()
    assert written != ("The profile's bound: no placement" in verdict)    # else: why not
