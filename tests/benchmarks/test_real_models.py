"""measure/real_models.py: the benchmark's models build, cache, and load in the command line.

Only the two cheapest (tens of ops each); bench_real_wins runs the rest."""

import argparse
import json
import os

import pytest

from measure import real_models


@pytest.mark.parametrize("name", ["control_flow", "lookup"])
def test_a_real_model_builds_once_and_inspects(name, tmp_path, monkeypatch, cli_here):
    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path))
    path = real_models.build(name)
    assert path.startswith(str(tmp_path)) and os.path.isfile(os.path.join(path, "saved_model.pb"))
    built = os.path.getmtime(os.path.join(path, "saved_model.pb"))
    assert real_models.build(name) == path                      # cached: not built again
    assert os.path.getmtime(os.path.join(path, "saved_model.pb")) == built
    result = cli_here("inspect", path, "--json")
    assert result.returncode == 0, result.stderr
    inspected = json.loads(result.stdout)
    assert "'serving_default'" in inspected["source"] and inspected["num_ops"] > 0


def test_an_audit_model_is_named_and_built_as_the_corpus_builds_it(tmp_path, monkeypatch):
    """bench_real_wins --models may name the audit set's models: built once, in the
    corpus's cache."""
    from measure import build_corpus

    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path))
    assert real_models.model_names("siamese, lookup") == ["siamese", "lookup"]
    with pytest.raises(ValueError, match="unknown models nonesuch"):
        real_models.model_names("siamese,nonesuch")
    path = real_models.build("siamese")
    assert path == build_corpus.build("siamese") and path.startswith(str(tmp_path))
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))


def test_a_bundled_example_is_a_source_beside_the_real_models(tmp_path, monkeypatch):
    """The benchmarks that also time the bundled graphs (bench_stream, bench_throughput) load
    NMT by its `examples:` source; the real models keep their own, built once."""
    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path))
    known = real_models.known_sources()
    assert known[:len(real_models.MODELS)] == list(real_models.MODELS)
    assert "nmt" in known and len(set(known)) == len(known)
    assert real_models.source("nmt") == "examples:nmt"
    assert real_models.source("inception_v3") == "examples:inception_v3"    # a bundled one
    assert real_models.source("lookup") == real_models.build("lookup")


def test_bench_real_wins_places_with_the_method_asked(tmp_path, monkeypatch):
    """`--place-args` reaches `place`: with the learned policy, the row gives its own answer
    beside the best point on its walk (both simulated), as `place --method placeto` does."""
    from measure import bench_real_wins
    monkeypatch.setenv("TF_PLACETO_CACHE", str(tmp_path))
    args = argparse.Namespace(
        cache=str(tmp_path / "profiles"), timeout=600.0, budget=1.0, sessions=1,
        place_args="--method placeto --start random --simulate")
    row = bench_real_wins.bench("lookup", str(tmp_path), args)
    assert "error" not in row, row.get("error")
    assert 0 < row["best_on_walk_step_s"] <= row["policy_step_s"]
    table = bench_real_wins.table([row]).iloc[0]
    assert table["policy alone / best on walk (ms, simulated)"] == (
        f"{row['policy_step_s'] * 1e3:.1f} / {row['best_on_walk_step_s'] * 1e3:.1f}")
