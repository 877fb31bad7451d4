"""Workloads: a graph imported, grouped and profiled once, then stated as placement problems."""

import numpy as np
import pytest

import tf_placeto as tp
from tf_placeto.measure.runtimes.runtime import Runtime
from tf_placeto.workload import MemoryLimit, load_workload


@pytest.fixture(scope="module")
def workload(small_cnn_model, tmp_path_factory):
    runtime = Runtime.local(tp.DeviceSet.local(2))
    return load_workload(small_cnn_model, runtime, max_groups=12,
                         cache=str(tmp_path_factory.mktemp("profiles")))


@pytest.mark.parametrize("text, expected", [
    ("2GiB", MemoryLimit(bytes=2 * 2**30)), ("500MB", MemoryLimit(bytes=500e6)),
    ("123456789", MemoryLimit(bytes=123456789.0)), ("0.6", MemoryLimit(fraction=0.6)),
    ("1", MemoryLimit(fraction=1.0)), ("1.5e9", MemoryLimit(bytes=1.5e9)),
])
def test_memory_limits_parse(text, expected):
    assert MemoryLimit.parse(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "-1", "0", "2 parsecs", "0.5GiB/s"])
def test_bad_memory_limits_are_refused(text):
    with pytest.raises(tp.PlacetoError, match="memory per device"):
        MemoryLimit.parse(text)


def test_the_profiled_devices_and_more_like_them(workload):
    assert len(workload.groups) <= 12
    profiled = workload.problem()
    assert profiled.device_names == ["/device:CPU:0", "/device:CPU:1"]
    four = workload.problem(4)
    assert four.device_names == [f"/device:CPU:{k}" for k in range(4)]
    np.testing.assert_allclose(four.compute_us[:, 3], profiled.compute_us[:, 0])
    assert four.latency_us[2, 3] == profiled.latency_us[0, 1]
    assert np.isinf(four.capacity_bytes).all()


def test_a_memory_fraction_caps_every_device(workload):
    problem = workload.problem(2, MemoryLimit(fraction=0.5))
    assert problem.capacity_bytes == pytest.approx([0.5 * problem.single_device_peak_bytes] * 2)
    everything_on_one = np.zeros(problem.n_groups, np.int64)
    assert not problem.simulate(everything_on_one).feasible
    assert workload.problem(2).simulate(everything_on_one).feasible


def test_the_expert_learns_the_layers_of_bundled_examples(workload):
    from tf_placeto.workload import _expert_layers

    rules = _expert_layers("examples:nmt")
    assert any("attention" in pattern for pattern, _ in rules)
    assert _expert_layers("examples:inception_v3") == () == _expert_layers("/some/model")
    assert workload.expert_layers == ()
