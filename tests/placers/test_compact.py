"""Compact cost profiles: a graph's placement problems kept in one file, read back without
TensorFlow or the model, simulating what the live workload simulates."""

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import tf_placeto as tp
from tests.helpers import REPO
from tf_placeto.errors import InputError
from tf_placeto.measure.costs.costmodel import Link
from tf_placeto.placers.compact import CompactProfile

# the profiled devices, more of them on the measured links, and on links asked for: between
# the GPUs of one machine (Placeto's K80s) and between tasks of a cluster
SETTINGS = [(None, None), (3, None), (4, "k80"), (3, "25:7600")]


@pytest.fixture(scope="module")
def workload(small_cnn_model, small_profiles):
    """small_cnn as the policy tests' problems have it (its profile shared with them)."""
    from tf_placeto.measure.runtimes.runtime import Runtime
    from tf_placeto.workload import load_workload

    return load_workload(small_cnn_model, Runtime.local(tp.DeviceSet.local(2)), max_groups=12,
                         cache=small_profiles)


@pytest.fixture(scope="module")
def saved(workload, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("compact") / "small_cnn.npz")
    CompactProfile.of(workload.groups, workload.cost_model, name="small_cnn",
                      family="plain_cnn").save(path)
    return path


@pytest.mark.parametrize("n_devices, link", SETTINGS)
def test_a_loaded_profile_simulates_what_the_workload_does(workload, saved, n_devices, link):
    link = link and Link.parse(link)
    live, loaded = workload.problem(n_devices, link=link), CompactProfile.load(saved).problem(
        n_devices, link)
    assert loaded.device_names == live.device_names
    for name in ("compute_us", "memory_bytes", "edge_src", "edge_dst", "edge_bytes",
                 "edge_extra_us", "latency_us", "bytes_per_us"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(live, name), name)
    placements = np.random.default_rng(0).integers(0, live.n_devices, (6, live.n_groups))
    for decision in [np.zeros(live.n_groups, np.int64), *placements]:
        ours, theirs = loaded.evaluate(decision), live.evaluate(decision)
        assert (ours.us_per_step, ours.feasible) == (theirs.us_per_step, theirs.feasible)
        np.testing.assert_array_equal(ours.peak_memory_bytes, theirs.peak_memory_bytes)
        assert loaded.placement(decision) == live.placement(decision)
    throughput = (loaded.with_objective("throughput").evaluate(placements[0]).us_per_step,
                  live.with_objective("throughput").evaluate(placements[0]).us_per_step)
    assert throughput[0] == throughput[1]


def test_the_file_keeps_the_graph_its_family_and_where_it_was_profiled(workload, saved):
    profile = CompactProfile.load(saved)
    assert (profile.name, profile.family) == ("small_cnn", "plain_cnn")
    assert profile.meta["ops"] == len(workload.graph) and profile.meta["groups"] == 12
    assert profile.meta["devices"] == workload.profiled_devices
    assert profile.meta["profile"]["key"] == workload.cost_model.meta["key"]
    graph = profile.op_graph
    assert [op.type for op in graph.ops] == [op.type for op in workload.graph.ops]
    assert graph.topological_order() == workload.graph.topological_order()
    assert profile.groups.summary() == workload.groups.summary()


def test_a_profile_states_problems_without_the_model_or_its_profile(saved, tmp_path):
    """In a fresh process whose cache is empty: no SavedModel, no profile, no runtime."""
    code = ("from tf_placeto.placers.compact import CompactProfile\n"
            f"problem = CompactProfile.load({saved!r}).problem(8)\n"
            "print(problem.evaluate([0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]).us_per_step)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, env={**os.environ, "TF_PLACETO_CACHE": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout) > 0 and not os.listdir(tmp_path)


def test_a_damaged_or_foreign_file_is_refused_naming_it(saved, tmp_path):
    with open(saved, "rb") as file:
        data = file.read()
    truncated, garbage = tmp_path / "truncated.npz", tmp_path / "garbage.npz"
    truncated.write_bytes(data[:len(data) // 2])
    garbage.write_bytes(b"not an archive at all")
    foreign = tmp_path / "foreign.npz"
    np.savez_compressed(foreign, weights=np.ones(3))
    for path in (truncated, garbage, foreign, tmp_path / "missing.npz"):
        with pytest.raises(InputError, match=f"{path} is not a compact cost profile"):
            CompactProfile.load(str(path))


def test_a_profile_of_another_version_or_missing_arrays_is_refused(saved, tmp_path):
    with np.load(saved) as archive:
        arrays = {name: archive[name] for name in archive.files}
    meta = json.loads(str(arrays.pop("meta")))
    newer = tmp_path / "newer.npz"
    np.savez_compressed(newer, meta=np.array(json.dumps({**meta, "version": 99})), **arrays)
    with pytest.raises(InputError, match="version 99.*build it again"):
        CompactProfile.load(str(newer))
    arrays.pop("compute_us")
    partial = tmp_path / "partial.npz"
    np.savez_compressed(partial, meta=np.array(json.dumps(meta)), **arrays)
    with pytest.raises(InputError, match="lacks compute_us"):
        CompactProfile.load(str(partial))
    assert zipfile.is_zipfile(saved)     # the format is a plain archive: numbers and text
