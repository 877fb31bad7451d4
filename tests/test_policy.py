"""The Placeto policy on TF-Agents: environment, network, training, export, placing."""

import json
import os
import textwrap

import numpy as np
import pytest

from helpers import run_python
from tf_placeto.policy import specs
from tf_placeto.policy.training import Baselines, Trainer, TrainingConfig

TINY = TrainingConfig(episodes=2, embedding=8, rounds=2, seed=3)


def test_an_episode_places_every_group_once_and_returns_the_speedup(policy_problems):
    from tf_placeto.policy.environment import PlacementEnvironment

    problem = policy_problems[0]
    env = PlacementEnvironment([problem], seed=0)
    step = env.reset()
    for key, spec in env.observation_spec().items():
        assert step.observation[key].shape == spec.shape
        assert step.observation[key].dtype == spec.dtype
    rewards = []
    for g in range(problem.n_groups):
        assert step.observation["features"][g, specs.CURRENT] == 1.0
        assert not step.is_last()
        step = env.step(np.int32(g % 2))
        rewards.append(float(step.reward))
    assert step.is_last()
    final = problem.simulate(np.arange(problem.n_groups) % 2).step_time_us
    first = env.episode.first
    assert sum(rewards) == pytest.approx((first - final) / first, rel=1e-4)
    assert env.best[0][0] <= min(first, final) + 1e-6


def test_devices_that_are_absent_or_lack_a_kernel_are_masked(policy_problems):
    from tf_placeto.policy.environment import Episode, GraphView

    problem = policy_problems[1]
    compute = problem.compute_us.copy()
    compute[0, 1] = np.inf                          # group 0 has no kernel on device 1
    import dataclasses

    episode = Episode(GraphView(dataclasses.replace(problem, compute_us=compute)))
    assert list(episode.observation()["device_mask"]) == [1, 0, 1, 0, 0, 0, 0, 0]
    before = episode.devices[0]
    episode.move(1)                                 # refused: stays where it was
    assert episode.devices[0] == before


def test_one_network_places_graphs_of_any_size_without_retracing(policy_problems):
    import tensorflow as tf
    from tf_agents.utils import common

    from tf_placeto.policy.environment import Episode, GraphView
    from tf_placeto.policy.network import PlacetoNetwork

    from tf_agents.specs import tensor_spec

    network = PlacetoNetwork(tensor_spec.from_spec(specs.observation_spec()),
                             tensor_spec.from_spec(specs.action_spec()), embedding=8, rounds=2)
    call = common.function(lambda observation: network(observation)[0].probs_parameter())
    traces = []
    for problem in policy_problems:
        observation = Episode(GraphView(problem)).observation()
        probabilities = call({k: tf.constant(v[None]) for k, v in observation.items()})[0]
        assert probabilities.shape == (specs.MAX_DEVICES,)
        assert np.allclose(probabilities[problem.n_devices:], 0.0)
        assert np.sum(probabilities) == pytest.approx(1.0, rel=1e-5)
        traces.append(call.experimental_get_tracing_count())
    assert traces[1] == traces[0]           # the second graph ran the first one's trace


def test_baselines_turn_returns_into_advantages():
    baselines = Baselines(window=2)
    first = np.array([[1.0, 2.0, 3.0]], np.float32)
    returns = np.cumsum(first[:, ::-1], axis=1)[:, ::-1]          # [[6, 5, 3]]
    np.testing.assert_allclose(baselines.reshape(0, first, returns), first)  # no history yet
    second = np.array([[0.0, 0.0, 1.0]], np.float32)
    shaped = baselines.reshape(0, second, np.cumsum(second[:, ::-1], axis=1)[:, ::-1])
    shaped_returns = np.cumsum(shaped[:, ::-1], axis=1)[:, ::-1]
    np.testing.assert_allclose(shaped_returns, [[1 - 6, 1 - 5, 1 - 3]])


def test_training_resumes_where_it_stopped_and_exports_a_policy(policy_problems, tmp_path):
    out = str(tmp_path / "run")
    trainer = Trainer(policy_problems, out, TINY)
    history = trainer.run(2)
    assert [row["iteration"] for row in history] == [1, 2]
    assert all(np.isfinite(row["loss"]) for row in history)
    resumed = Trainer(policy_problems, out, TINY)       # as if the first run had been killed
    assert resumed.iterations_done == 2
    assert [row["iteration"] for row in resumed.run(3)] == [1, 2, 3]
    policy = resumed.export()
    assert os.path.isfile(os.path.join(policy, "saved_model.pb"))
    log = json.load(open(os.path.join(out, "training.json")))
    assert log["config"]["embedding"] == 8 and len(log["iterations"]) == 3
    assert os.listdir(os.path.join(out, "summaries"))


@pytest.fixture(scope="module")
def trained(policy_problems, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("policy"))
    trainer = Trainer(policy_problems, out, TINY)
    trainer.run(2)
    trainer.export()
    return out


def test_a_policy_places_with_plain_tensorflow_and_keras_3(trained, policy_problems, tmp_path):
    """The exported policy runs where tf-agents and legacy Keras are absent."""
    import pickle

    problem_file = tmp_path / "problem.pkl"
    problem_file.write_bytes(pickle.dumps(policy_problems[0]))
    result = run_python(textwrap.dedent(f"""
        import json, pickle, sys
        import keras                                    # Keras 3 chosen first
        from tf_placeto.policy.inference import greedy_placement
        problem = pickle.load(open({str(problem_file)!r}, "rb"))
        devices, value, _ = greedy_placement(problem, {trained!r})
        print(json.dumps({{"devices": [int(d) for d in devices], "value": value,
                          "tf_agents": "tf_agents" in sys.modules, "keras": keras.__version__}}))
    """))
    placed = json.loads(result.stdout.splitlines()[-1])
    assert not placed["tf_agents"] and placed["keras"].startswith("3")
    assert len(placed["devices"]) == policy_problems[0].n_groups and placed["value"] > 0


@pytest.mark.parametrize("start", ["random", "fast"])
def test_placeto_placer_zero_shot_and_fine_tuned(trained, policy_problems, start):
    from tf_placeto.placers.common import FAST_PLACERS
    from tf_placeto.policy import inference
    from tf_placeto.policy.environment import fast_start

    problem = policy_problems[0]
    zero_shot, info = inference.place(problem, policy_dir=trained, start=start)
    assert zero_shot.shape == (problem.n_groups,) and info["budget"] == 0
    tuned, tuned_info = inference.place(problem, policy_dir=trained, budget=2, start=start)
    assert tuned_info["objective_us"] <= info["objective_us"] + 1e-6
    # every placement simulated: the start (with "fast", each fast placer's decision), the
    # greedy episode's moves, 2 iterations of TINY's 2 episodes
    starts = len(FAST_PLACERS) if start == "fast" else 1
    assert info["evaluations"] == starts + problem.n_groups
    assert tuned_info["evaluations"] == starts + problem.n_groups + 2 * 2 * problem.n_groups
    for facts in (info, tuned_info):
        assert 1 <= facts["evaluations_to_5pct"] <= facts["evaluations"]
    if start == "fast":         # never worse than the decision it started from
        name, _, values = fast_start(problem)
        assert info["start"] == name and info["objective_us"] <= min(values) + 1e-6
    else:
        assert info["start"] == "random"


def test_episodes_go_on_from_the_previous_placement_or_restart_from_a_fixed_one(policy_problems):
    from tf_placeto.policy.environment import PlacementEnvironment

    problem = policy_problems[1]
    initial = np.zeros(problem.n_groups, np.int64)
    for restart in ("fixed", "previous"):
        env = PlacementEnvironment([problem], seed=0, restart=restart, initial=[initial])
        firsts, lasts = [], []
        for _ in range(2):
            env.reset()
            firsts.append(env.episode.devices.copy())
            for group in range(problem.n_groups):
                env.step(np.int32((group + 1) % problem.n_devices))
            lasts.append(env.episode.devices.copy())
        np.testing.assert_array_equal(firsts[0], initial)
        np.testing.assert_array_equal(firsts[1], initial if restart == "fixed" else lasts[0])
    with pytest.raises(ValueError, match="restart must be one of"):
        PlacementEnvironment([problem], restart="best")


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
