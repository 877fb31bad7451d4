"""measure/real_models.py: the benchmark's models build, cache, and load in the command line.

Only the two cheapest (tens of ops each); bench_real_wins runs the rest."""

import json
import os

import pytest

from measure import real_models
from tests.helpers import run_cli


@pytest.mark.parametrize("name", ["control_flow", "lookup"])
def test_a_real_model_builds_once_and_inspects(name, tmp_path, monkeypatch):
    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path))
    path = real_models.build(name)
    assert path.startswith(str(tmp_path)) and os.path.isfile(os.path.join(path, "saved_model.pb"))
    built = os.path.getmtime(os.path.join(path, "saved_model.pb"))
    assert real_models.build(name) == path                      # cached: not built again
    assert os.path.getmtime(os.path.join(path, "saved_model.pb")) == built
    result = run_cli("inspect", path, "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    inspected = json.loads(result.stdout)
    assert "'serving_default'" in inspected["source"] and inspected["num_ops"] > 0
