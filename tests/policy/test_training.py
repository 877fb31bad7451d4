"""Training with TF-Agents: baselines, checkpoints, resuming, warm starts, export, legacy
Keras."""

import dataclasses
import json
import os
import random
import textwrap

import numpy as np
import pytest

from tests.helpers import run_python
from tf_placeto.errors import InputError
from tf_placeto.policy import specs
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.observation import GraphView
from tf_placeto.policy.training import Baselines, Trainer, iterations_by_setting


def _returns(rewards):
    return np.cumsum(rewards[:, ::-1], axis=1)[:, ::-1]


def test_baselines_turn_returns_into_advantages():
    """The first episodes of a problem are measured against their own mean (one better, one
    worse), the next against the mean of those before."""
    baselines = Baselines(window=2)
    first = np.array([[1.0, 2.0, 3.0], [1.0, 0.0, 1.0]], np.float32)   # returns 6 5 3; 2 1 1
    shaped = baselines.reshape(Baselines.key(0), first, _returns(first))
    np.testing.assert_allclose(_returns(shaped), [[2, 2, 1], [-2, -2, -1]])
    second = np.array([[0.0, 0.0, 1.0]], np.float32)
    shaped = baselines.reshape(Baselines.key(0), second, _returns(second))
    np.testing.assert_allclose(_returns(shaped), [[1 - 4, 1 - 3, 1 - 2]])


def test_each_start_of_a_problem_keeps_its_own_baseline(tmp_path):
    """Episodes from the fast placers' decision return less than those from a random start:
    a later stage from another start must not be measured against the earlier stage's."""
    baselines = Baselines(window=4)
    from_random = np.array([[5.0, 5.0]], np.float32)
    baselines.reshape(Baselines.key(0), from_random, _returns(from_random))
    baselines.save(str(tmp_path))
    resumed = Baselines(window=4)
    resumed.load(str(tmp_path))
    from_fast = np.array([[0.5, 0.5], [0.0, 0.5]], np.float32)
    shaped = resumed.reshape(Baselines.key(0, "fast"), from_fast, _returns(from_fast))
    np.testing.assert_allclose(_returns(shaped), [[0.25, 0.0], [-0.25, 0.0]])
    again = resumed.reshape(Baselines.key(0), from_random, _returns(from_random))
    np.testing.assert_allclose(_returns(again), [[0.0, 0.0]])      # the random start's own


def test_the_log_is_read_by_setting():
    """What `train` prints: per link and start, how many iterations were followed by
    imitation; a log from before the rows carried their link is read by start."""
    history = [{"iteration": i + 1, "link": link, "start": start, "mean_return": ret,
                **({"imitation_loss": 0.5} if imitated else {})}
               for i, (link, start, ret, imitated) in enumerate([
                   ("k80", "random", 0.2, True), ("25:7600", "random", -0.1, False),
                   ("k80", "random", 0.4, False), ("k80", "fast", 0.0, True)])]
    table = iterations_by_setting(history)
    assert table[["link", "start", "iterations", "imitated"]].values.tolist() == [
        ["k80", "random", 2, 1], ["25:7600", "random", 1, 0], ["k80", "fast", 1, 1]]
    np.testing.assert_allclose(table["mean_return"], [0.3, -0.1, 0.0])
    old = iterations_by_setting([{k: v for k, v in row.items() if k != "imitation_loss"
                                  and k != "link"} for row in history])
    assert old[["start", "iterations", "imitated"]].values.tolist() == [
        ["random", 3, 0], ["fast", 1, 0]]


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
    log = json.load(open(os.path.join(out, "training.json")))
    assert log["config"]["embedding"] == 8 and len(log["iterations"]) == 3
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


def test_a_warm_start_takes_an_older_networks_weights_and_scores_as_it_did(
        policy_problems, tmp_path, tiny, monkeypatch):
    """A network trained before the device rows gained their last column starts a new run:
    its weights carry over, the new column's at zero, so the new network scores every
    device as the old one did; weights that cannot carry over are refused."""
    old_dir = str(tmp_path / "old")
    with monkeypatch.context() as patched:
        patched.setattr(specs, "NUM_CANDIDATE_FEATURES", specs.NUM_CANDIDATE_FEATURES - 1)
        old = Trainer(policy_problems, old_dir, tiny)
        old.save()
    observation = {k: v[None] for k, v in Episode(GraphView(policy_problems[0])).observation()
                   .items()}
    observation["candidates"][..., -1] = 1.0          # the new column says something
    before = {**observation, "candidates": observation["candidates"][..., :-1]}
    old_logits = old.actor(before)[0].logits.numpy()
    other_seed = dataclasses.replace(tiny, seed=tiny.seed + 1)
    cold = Trainer(policy_problems, str(tmp_path / "cold"), other_seed)
    assert not np.allclose(cold.actor(observation)[0].logits.numpy(), old_logits)
    warm = Trainer(policy_problems, str(tmp_path / "warm"),
                   dataclasses.replace(other_seed, warm_start=old_dir))
    np.testing.assert_allclose(warm.actor(observation)[0].logits.numpy(), old_logits,
                               rtol=1e-5, atol=1e-6)
    wider = dataclasses.replace(tiny, embedding=tiny.embedding * 2, warm_start=old_dir)
    with pytest.raises(InputError, match="only inputs appended"):
        Trainer(policy_problems, str(tmp_path / "wider"), wider)


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


def test_the_real_stage_measures_its_episodes_and_resumes_where_it_stopped(mlp_model, tmp_path,
                                                                          tiny):
    """Two logical CPUs of this process: one simulated iteration on three devices like them,
    then real iterations on the two, killed and resumed."""
    import tf_placeto as tp
    from tf_placeto.measure import fitting
    from tf_placeto.measure.runtime import Runtime
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
