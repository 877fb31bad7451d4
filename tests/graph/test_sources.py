"""Reading a SOURCE: a SavedModel's MetaGraph chosen by its tag set, as saved_model_cli does."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import REPO
from tf_placeto.api import apply_placement, import_graph
from tf_placeto.errors import SourceError
from tf_placeto.graph.sources import Source, load_source, source_path
from tf_placeto.measure.runtimes.runner import run_traced


def test_the_serve_tag_set_is_the_default(two_tag_sets_model):
    source = load_source(two_tag_sets_model)
    assert source.fetches == ["z:0"]
    assert list(source.meta_graph.meta_info_def.tags) == ["serve"]


def test_a_tag_set_picks_its_metagraph_in_any_order(two_tag_sets_model):
    for tag_set in ("train,gpu", "gpu, train"):
        source = load_source(Source(two_tag_sets_model, tag_set=tag_set))
        assert source.fetches == ["y:0"]
        assert "z" not in {node.name for node in source.graph_def.node}


def test_a_missing_tag_set_lists_those_there_are(two_tag_sets_model):
    with pytest.raises(SourceError, match=r"no MetaGraph with the tag set 'eval' \(tag sets: "
                                          r"train,gpu; serve\); choose one with --tag-set"):
        load_source(Source(two_tag_sets_model, tag_set="eval"))


def test_a_graphdef_has_no_tag_sets(two_tag_sets_model):
    with pytest.raises(SourceError, match="has no tag sets"):
        load_source(Source(load_source(two_tag_sets_model).graph_def, tag_set="serve"))


def test_the_placement_is_written_into_the_chosen_metagraph_and_runs(two_tag_sets_model,
                                                                      tmp_path):
    graph = import_graph(Source(two_tag_sets_model, tag_set="train,gpu"))
    out = str(tmp_path / "placed")
    apply_placement(graph, {"y": "/device:CPU:1"}, out, devices="/device:CPU:0,/device:CPU:1")
    placed = load_source(Source(out, tag_set="train,gpu"))
    assert {n.name: n.device for n in placed.graph_def.node}["y"] == "/device:CPU:1"
    assert load_source(out).graph_def == load_source(two_tag_sets_model).graph_def  # serve
    ran = run_traced(Source(out, tag_set="train,gpu"))
    assert ran.node_devices["y"].endswith("CPU:1")
    original = run_traced(Source(two_tag_sets_model, tag_set="train,gpu"))
    np.testing.assert_allclose(ran.outputs["y"], original.outputs["y"])


def test_where_a_source_is_read_from_is_known_without_reading_it(two_tag_sets_model, tmp_path):
    graph_file = tmp_path / "graph.pb"
    graph_file.write_bytes(load_source(two_tag_sets_model).graph_def.SerializeToString())
    for given in (two_tag_sets_model, os.path.join(two_tag_sets_model, "saved_model.pb"),
                  str(graph_file)):
        assert source_path(given) == load_source(given).path
    assert source_path(load_source(two_tag_sets_model).graph_def) is None


def _as_a_user_who_may_not_read(*args: str) -> subprocess.CompletedProcess:
    """The command, run by someone whom file permissions bind. The tests run as root here,
    who reads anything: root without the capabilities that override them (setpriv) is bound
    as any user, and needs no other user's access to this interpreter."""
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("root reads any file, and setpriv is not here to drop that")
    prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] \
        if os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-m", "tf_placeto.cli", *args], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO},
                          timeout=300)


def test_a_source_that_may_not_be_read_is_bad_input(two_tag_sets_model, tmp_path):
    graph_file, model = tmp_path / "graph.pb", tmp_path / "model"
    graph_file.write_bytes(load_source(two_tag_sets_model).graph_def.SerializeToString())
    shutil.copytree(two_tag_sets_model, model)
    for path in (graph_file, model):
        path.chmod(0)
        try:
            result = _as_a_user_who_may_not_read("inspect", str(path))
        finally:
            path.chmod(0o700)
        assert result.returncode == 2, result.stderr
        assert result.stderr.splitlines() == [
            f"tf-placeto: error: cannot read {path}: permission denied"]
