"""The problems the placer tests share: small_cnn and mlp in 32 groups, on 2 and 4 devices."""

import pytest

from tests.helpers import build_problem, grouped_example


@pytest.fixture(scope="module")
def small_cnn_groups():
    return grouped_example("small_cnn", 32)


@pytest.fixture(scope="module")
def mlp_groups():
    return grouped_example("mlp", 32)


@pytest.fixture(scope="module")
def two_devices(small_cnn_groups):
    return build_problem(small_cnn_groups, 2)


@pytest.fixture(scope="module")
def four_devices(small_cnn_groups):
    return build_problem(small_cnn_groups, 4)
