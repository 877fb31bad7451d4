"""Shared fixtures: bundled example SavedModels (cached under .cache/) and small helpers."""

import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")     # as the tf-placeto command: tf-agents needs it
os.environ.setdefault("TF_PLACETO_CACHE", os.path.join(REPO, ".cache"))


@pytest.fixture(scope="session")
def mlp_model():
    from tf_placeto.examples import registry

    return registry.saved_model_path("mlp")


@pytest.fixture(scope="session")
def small_cnn_model():
    from tf_placeto.examples import registry

    return registry.saved_model_path("small_cnn")


@pytest.fixture(scope="module")
def policy_problems(small_cnn_model, mlp_model, tmp_path_factory):
    """Two graphs, on 2 and 3 devices: problems of different sizes for one policy network."""
    import tf_placeto as tp
    from tf_placeto.measure.runtime import Runtime
    from tf_placeto.workload import load_workload

    runtime = Runtime.local(tp.DeviceSet.local(2))
    cache = str(tmp_path_factory.mktemp("profiles"))
    cnn = load_workload(small_cnn_model, runtime, max_groups=12, cache=cache)
    mlp = load_workload(mlp_model, runtime, max_groups=6, cache=cache)
    return [cnn.problem(2), mlp.problem(3)]
