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
    assert not os.listdir(tmp_path)
