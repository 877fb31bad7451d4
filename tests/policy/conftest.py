"""What the policy's tests share: a training configuration small enough to run in seconds."""

import pytest


@pytest.fixture(scope="session")
def tiny():
    from tf_placeto.policy.training import TrainingConfig  # heavy: TF-Agents, only when used

    return TrainingConfig(episodes=2, embedding=8, rounds=2, seed=3)


@pytest.fixture(scope="module")
def cnn_on_devices(small_cnn_model, small_profiles):
    """The small CNN's problem on 2, 5 and 16 devices alike (beyond the two profiled ones,
    simulated like them)."""
    import tf_placeto as tp
    from tf_placeto.measure.runtimes.runtime import Runtime
    from tf_placeto.workload import load_workload

    workload = load_workload(small_cnn_model, Runtime.local(tp.DeviceSet.local(2)),
                             max_groups=12, cache=small_profiles)
    return {n: workload.problem(n) for n in (2, 5, 16)}
