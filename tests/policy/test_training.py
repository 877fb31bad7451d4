"""Training with TF-Agents: baselines, checkpoints, resuming, export, legacy Keras."""

import json
import os
import textwrap

import numpy as np

from tests.helpers import run_python
from tf_placeto.policy.training import Baselines, Trainer


def test_baselines_turn_returns_into_advantages():
    baselines = Baselines(window=2)
    first = np.array([[1.0, 2.0, 3.0]], np.float32)
    returns = np.cumsum(first[:, ::-1], axis=1)[:, ::-1]          # [[6, 5, 3]]
    np.testing.assert_allclose(baselines.reshape(0, first, returns), first)  # no history yet
    second = np.array([[0.0, 0.0, 1.0]], np.float32)
    shaped = baselines.reshape(0, second, np.cumsum(second[:, ::-1], axis=1)[:, ::-1])
    shaped_returns = np.cumsum(shaped[:, ::-1], axis=1)[:, ::-1]
    np.testing.assert_allclose(shaped_returns, [[1 - 6, 1 - 5, 1 - 3]])


def test_training_resumes_where_it_stopped_and_exports_a_policy(policy_problems, tmp_path,
                                                                  tiny):
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, tiny)
    history = trainer.run(2)
    assert [row["iteration"] for row in history] == [1, 2]
    assert all(np.isfinite(row["loss"]) for row in history)
    resumed = Trainer(policy_problems, out, tiny)       # as if the first run had been killed
    assert resumed.iterations_done == 2
    assert [row["iteration"] for row in resumed.run(3)] == [1, 2, 3]
    policy = resumed.export()
    assert os.path.isfile(os.path.join(policy, "saved_model.pb"))
    log = json.load(open(os.path.join(out, "training.json")))
    assert log["config"]["embedding"] == 8 and len(log["iterations"]) == 3
    assert os.listdir(os.path.join(out, "summaries"))


def test_training_refuses_a_process_that_chose_keras_3(tmp_path):
    result = run_python(textwrap.dedent("""
        import keras
        from tf_placeto.policy import require_tf_agents
        from tf_placeto.errors import PlacetoError
        try:
            require_tf_agents()
        except PlacetoError as error:
            print("refused:", error)
    """))
    assert "refused:" in result.stdout and "TF_USE_LEGACY_KERAS=1" in result.stdout


def test_ppo_trains_the_same_network_with_its_critic(policy_problems, tmp_path, tiny):
    import dataclasses

    config = dataclasses.replace(tiny, algorithm="ppo")
    trainer = Trainer(policy_problems, str(tmp_path / "ppo"), config)
    history = trainer.run(2)
    assert [row["iteration"] for row in history] == [1, 2]
    assert all(np.isfinite(row["loss"]) for row in history)
