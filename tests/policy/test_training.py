"""Training with TF-Agents: iterations, resuming, one seed one policy, PPO, the real stage,
export, legacy Keras."""

import dataclasses
import json
import os
import random
import textwrap

import numpy as np
import pytest

from tests.helpers import run_python, tree_digest
from tf_placeto.errors import InputError
from tf_placeto.files import STAGING_PREFIX
from tf_placeto.policy import training
from tf_placeto.policy.training import Trainer


def test_training_resumes_where_it_stopped_and_exports_a_policy(policy_problems, tmp_path,
                                                                  tiny):
    out = str(tmp_path / "run")
    labels = [{"graph": f"graph {i}", "link": "k80"} for i in range(len(policy_problems))]
    trainer = Trainer(policy_problems, out, tiny, labels=labels)
    history = trainer.run(2)
    assert [row["iteration"] for row in history] == [1, 2]
    assert [row["graph"] for row in history] == [f"graph {row['problem']}" for row in history]
    assert all(np.isfinite(row["loss"]) for row in history)
    resumed = Trainer(policy_problems, out, tiny)       # as if the first run had been killed
    assert resumed.iterations_done == 2
    assert [row["iteration"] for row in resumed.run(3)] == [1, 2, 3]
    policy = resumed.export()
    assert os.path.isfile(os.path.join(policy, "saved_model.pb"))
    with pytest.raises(InputError, match="another size"):
        Trainer(policy_problems, out, dataclasses.replace(tiny, embedding=12))
    log = json.load(open(os.path.join(out, "training.json")))
    assert log["config"]["embedding"] == 8 and len(log["iterations"]) == 3
    assert log["step_change_weight"] == float(resumed.actor.step_change_weight)
    assert os.listdir(os.path.join(out, "summaries"))


def test_one_seed_trains_one_policy(policy_problems, tmp_path, tiny):
    """Two runs with one seed start from the same weights and train to the same ones, whatever
    drew random numbers before them (Keras seeds an initializer without a seed from Python's
    global generator), and leave the caller's Python and NumPy generators where they were."""
    def trained(out):
        np.random.seed(np.random.default_rng().integers(2 ** 31))     # what ran before
        random.seed(int(np.random.default_rng().integers(2 ** 31)))
        callers = np.random.get_state(), random.getstate()
        trainer = Trainer(policy_problems, str(tmp_path / out), tiny)
        drawn = np.random.random(), random.random()
        np.random.set_state(callers[0])
        random.setstate(callers[1])
        assert drawn == (np.random.random(), random.random())   # the caller's, given back
        first = [w.numpy() for w in trainer.actor.trainable_variables]
        history = trainer.run(2)
        return first, [w.numpy() for w in trainer.actor.trainable_variables], history

    (first_a, last_a, history_a), (first_b, last_b, history_b) = trained("a"), trained("b")
    for a, b in zip(first_a + last_a, first_b + last_b):
        np.testing.assert_array_equal(a, b)
    assert [row["mean_return"] for row in history_a] == [row["mean_return"] for row in history_b]


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
    config = dataclasses.replace(tiny, algorithm="ppo", ppo_epochs=2)   # each traced: seconds
    trainer = Trainer(policy_problems, str(tmp_path / "ppo"), config)
    history = trainer.run(2)
    assert [row["iteration"] for row in history] == [1, 2]
    assert all(np.isfinite(row["loss"]) for row in history)


def test_the_real_stage_measures_its_episodes_and_resumes_where_it_stopped(mlp_model, tmp_path,
                                                                          tiny):
    """Two logical CPUs of this process: one simulated iteration on three devices like them,
    then real iterations on the two, killed and resumed."""
    import tf_placeto as tp
    from tf_placeto.measure.profiling import fitting
    from tf_placeto.measure.runtimes.runtime import Runtime
    from tf_placeto.policy.real import MeasuredGraph, RealSteps
    from tf_placeto.workload import load_workload

    runtime = Runtime.local(tp.DeviceSet.local(2))
    mlp = load_workload(mlp_model, runtime, max_groups=6, cache=str(tmp_path / "profiles"))
    problems = [mlp.problem(3), mlp.problem()]
    real = RealSteps(runtime, {1: MeasuredGraph(mlp.graph, mlp.profile_dir)}, budget_s=2.0)
    out = str(tmp_path / "run")
    Trainer(problems, out, tiny).run(1)
    Trainer(problems, out, tiny).run(2, real=real)
    resumed = Trainer(problems, out, tiny)              # as if killed after the first
    assert resumed.iterations_done == 2
    history = resumed.run(3, real=real)
    assert "real_return" not in history[0]
    for row in history[1:]:
        assert row["problem"] == 1 and len(row["real_end_s"]) == tiny.episodes
        starts, ends = np.array(row["real_start_s"]), np.array(row["real_end_s"])
        assert (starts > 0).all() and (ends > 0).all()
        assert row["real_return"] == pytest.approx(np.mean((starts - ends) / starts))
        assert row["mean_return"] == pytest.approx(row["real_return"], abs=1e-5)
    logged = fitting.read(mlp.profile_dir, len(mlp.graph.ops))
    assert sum(o.origin == "train" for o in logged) >= 2


def test_an_export_killed_midway_leaves_the_old_policy_whole(policy_problems, tmp_path, tiny,
                                                             monkeypatch):
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, tiny)
    policy = trainer.export()
    exported = tree_digest(policy)

    def killed(saver, path):
        os.makedirs(path)
        with open(os.path.join(path, "saved_model.pb"), "wb") as file:
            file.write(b"\x08")
        raise KeyboardInterrupt

    monkeypatch.setattr(training.policy_saver.PolicySaver, "save", killed)
    with pytest.raises(KeyboardInterrupt):
        trainer.export()
    assert tree_digest(policy) == exported
    assert not [name for name in os.listdir(out) if name.startswith(STAGING_PREFIX)]
