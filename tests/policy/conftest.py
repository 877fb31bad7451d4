"""What the policy's tests share: a training configuration small enough to run in seconds."""

import pytest

from tf_placeto.policy.training import TrainingConfig


@pytest.fixture(scope="session")
def tiny():
    return TrainingConfig(episodes=2, embedding=8, rounds=2, seed=3)
