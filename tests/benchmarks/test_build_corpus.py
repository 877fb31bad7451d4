"""measure/build_corpus.py: a corpus model built in a child process, profiled, kept as its
compact profile; a model that fails is reported and skipped, whole files are kept."""

import dataclasses
import os

import pandas as pd
import pytest

import tf_placeto as tp
from measure import build_corpus
from tf_placeto.errors import InputError
from tf_placeto.examples import corpus
from tf_placeto.placers.compact import CompactProfile

CHEAP = "control_flow_long"     # 17 ops: built and profiled in seconds


def test_a_model_is_built_profiled_and_kept_and_a_broken_one_skipped(
        tmp_path, monkeypatch, capsys, small_profiles):
    from tf_placeto.measure.runtimes.runtime import Runtime

    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path / "cache"))
    # the child process that builds it knows no such model: its build fails for real
    monkeypatch.setitem(corpus.MODELS, "broken",
                        dataclasses.replace(corpus.MODELS[CHEAP], name="broken"))
    out = str(tmp_path / "corpus")
    runtime = Runtime.local(tp.DeviceSet.local(2))
    failed = build_corpus.build_corpus(out, ["broken", CHEAP], runtime, small_profiles)
    assert list(failed) == ["broken"] and "broken: building it failed" in failed["broken"]
    assert sorted(os.listdir(out)) == [f"{CHEAP}.npz", build_corpus.MANIFEST]
    table = pd.read_csv(os.path.join(out, build_corpus.MANIFEST))
    assert table[["name", "family"]].values.tolist() == [[CHEAP, "control_flow"]]
    profile = CompactProfile.load(os.path.join(out, f"{CHEAP}.npz"))
    assert profile.meta["ops"] == table["ops"][0] and profile.meta["tensorflow"]
    assert profile.meta["devices"] == runtime.device_names
    assert profile.problem(3).evaluate([0] * profile.meta["groups"]).us_per_step > 0

    written = os.path.getmtime(os.path.join(out, f"{CHEAP}.npz"))
    assert build_corpus.main(["--out", out, "--only", CHEAP, "--cache", small_profiles]) == 0
    assert os.path.getmtime(os.path.join(out, f"{CHEAP}.npz")) == written    # kept
    assert f"{CHEAP} control_flow" in " ".join(capsys.readouterr().out.split())


def test_an_unknown_model_is_refused_before_anything_is_built(tmp_path):
    with pytest.raises(InputError, match="unknown corpus models nonesuch"):
        build_corpus.build_corpus(str(tmp_path), ["nonesuch"])
    with pytest.raises(InputError, match="unknown corpus models unet"):     # an audit model
        build_corpus.build_corpus(str(tmp_path), ["unet"])
    with pytest.raises(InputError, match="unknown audit models resnet50"):
        build_corpus.build_corpus(str(tmp_path), ["resnet50"], audit_set=True)
    assert not os.listdir(tmp_path)


def test_a_clusters_runtime_is_measured_and_poses_a_graphs_tasks(tmp_path, monkeypatch):
    """--cluster-runtime: what a calibrated profile on local:2 measured of the runtime, kept
    beside the profiles, and the corpus's cluster setting posing another graph with it."""
    import json

    from tf_placeto.placers.corpus_problems import CLUSTER_RUNTIME, SETTINGS, load_profiles

    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path / "cache"))
    out = str(tmp_path / "corpus")
    record = build_corpus.measure_cluster_runtime(out, "local:2", model=CHEAP)
    with open(os.path.join(out, CLUSTER_RUNTIME)) as file:
        assert json.load(file) == record
    assert record["model"] == CHEAP and record["runtime"] == "local:2"
    assert len(record["devices"]) == 2
    assert "task:1" in record["devices"][1] and record["calibration"]["observations"] > 0
    [lookup] = load_profiles(names=["lookup"])
    problem = SETTINGS["cluster"].problem(lookup, 3, cluster=record)
    assert "task:2" in problem.device_names[2]
    assert problem.simulation.remote_task_us == record["calibration"]["remote_task_us"]
