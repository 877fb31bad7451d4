"""Shared fixtures: bundled example SavedModels (cached under .cache/) and small helpers."""

import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")     # as the tf-placeto command: tf-agents needs it
os.environ.setdefault("TF_PLACETO_CACHE", os.path.join(REPO, ".cache"))


@pytest.fixture(scope="session")
def mlp_model():
    from examples import registry

    return registry.saved_model_path("mlp")


@pytest.fixture(scope="session")
def small_cnn_model():
    from examples import registry

    return registry.saved_model_path("small_cnn")
