"""What the policy's tests share: a training configuration small enough to run in seconds."""

import pytest


@pytest.fixture(scope="session")
def tiny():
    from tf_placeto.policy.training import TrainingConfig  # heavy: TF-Agents, only when used

    return TrainingConfig(episodes=2, embedding=8, rounds=2, seed=3)
