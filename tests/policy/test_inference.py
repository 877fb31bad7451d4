"""Placing with a trained policy: plain TensorFlow under Keras 3, zero-shot and fine-tuned."""

import dataclasses
import json
import pickle
import textwrap

import numpy as np
import pytest

from tests.helpers import run_python
from tf_placeto.placers.common import fast_placers
from tf_placeto.policy import checkpoints, inference, training
from tf_placeto.policy.starts import fast_start, initial_placement
from tf_placeto.policy.training import Trainer


@pytest.fixture(scope="module")
def trained(policy_problems, tmp_path_factory, tiny):
    out = str(tmp_path_factory.mktemp("policy"))
    trainer = Trainer(policy_problems, out, tiny)
    trainer.run(2)
    trainer.export()
    return out


def test_a_policy_places_with_plain_tensorflow_and_keras_3(trained, policy_problems, tmp_path):
    """The exported policy runs where tf-agents and legacy Keras are absent."""
    problem_file = tmp_path / "problem.pkl"
    problem_file.write_bytes(pickle.dumps(policy_problems[0]))
    result = run_python(textwrap.dedent(f"""
        import json, pickle, sys
        import keras                                    # Keras 3 chosen first
        from tf_placeto.policy.inference import greedy_placement
        problem = pickle.load(open({str(problem_file)!r}, "rb"))
        walk = greedy_placement(problem, {trained!r})
        devices, value = walk.devices, walk.value
        print(json.dumps({{"devices": [int(d) for d in devices], "value": value,
                          "tf_agents": "tf_agents" in sys.modules, "keras": keras.__version__}}))
    """))
    placed = json.loads(result.stdout.splitlines()[-1])
    assert not placed["tf_agents"] and placed["keras"].startswith("3")
    assert len(placed["devices"]) == policy_problems[0].n_groups and placed["value"] > 0


@pytest.mark.parametrize("start", ["random", "fast", "single"])
def test_placeto_placer_zero_shot_and_fine_tuned(trained, policy_problems, start):
    problem = policy_problems[0]
    zero_shot, info = inference.place(problem, policy_dir=trained, start=start)
    assert zero_shot.shape == (problem.n_groups,) and info["budget"] == 0
    tuned, tuned_info = inference.place(problem, policy_dir=trained, budget=2, start=start)
    assert tuned_info["objective_us"] <= info["objective_us"] + 1e-6
    # every placement simulated: the start (with "fast", each fast placer's decision), then
    # per move of the greedy episode's passes and of 2 iterations of tiny's 2 episodes, each
    # other device the group may use (its row's; the move takes one of them or stays)
    starts = len(fast_placers()) if start == "fast" else 1
    per_episode = int((problem.allowed.sum(axis=1) - 1).sum())
    walked = info["passes"] * per_episode
    assert 1 <= info["passes"] <= inference.PASSES and tuned_info["passes"] == info["passes"]
    assert info["evaluations"] == starts + walked
    assert tuned_info["evaluations"] == starts + walked + 2 * 2 * per_episode
    for facts in (info, tuned_info):
        assert 1 <= facts["evaluations_to_5pct"] <= facts["evaluations"]
        # the policy's own answer beside the best point of its walk: the zero-shot placement
        # is that best point, and the walk ends no better
        assert facts["best_on_walk_step_s"] <= facts["policy_step_s"]
        assert len(facts["pass_step_s"]) == facts["passes"]
        assert facts["pass_step_s"][-1] == facts["policy_step_s"]
        assert min(facts["pass_step_s"]) >= facts["best_on_walk_step_s"]
    assert info["objective_us"] == pytest.approx(info["best_on_walk_step_s"] * 1e6)
    if start == "fast":         # never worse than the decision it started from
        name, _, values = fast_start(problem)
        assert info["start"] == name and info["objective_us"] <= min(values) + 1e-6
    elif start == "single":     # every group on one device: the walk starts there
        _, devices, [value] = initial_placement(problem, "single")
        assert info["start"] == "single" and len(set(devices.tolist())) == 1
        assert info["best_on_walk_step_s"] <= value / 1e6 + 1e-12
    else:
        assert info["start"] == "random"


def test_the_greedy_episode_may_walk_the_groups_again(trained, policy_problems):
    from tf_placeto import methods
    from tf_placeto.errors import InputError

    problem = policy_problems[0]
    once = inference.greedy_placement(problem, trained)
    _, info = inference.place(problem, policy_dir=trained, start="random", passes=3)
    walk = inference.greedy_placement(problem, trained, passes=3)
    assert info["passes"] == walk.passes and 2 <= walk.passes <= 3     # the first pass moves
    assert info["policy_step_s"] == pytest.approx(walk.end_value / 1e6)
    assert info["evaluations"] == len(walk.objectives) >= len(once.objectives)
    _, default = inference.place(problem, policy_dir=trained, start="random")
    assert default["passes"] == inference.greedy_placement(
        problem, trained, passes=inference.PASSES).passes     # a small graph: every pass
    with pytest.raises(InputError, match="passes"):
        methods.decide("placeto", problem, given={"policy": trained, "passes": 0})


def test_one_shipped_policy_for_a_machines_devices_and_for_a_clusters_tasks(policy_problems):
    """One network for every setting: it places, and fine-tunes from its checkpoint, devices of
    one machine and tasks of a cluster alike, reading every column of today's device rows."""
    problem = policy_problems[0]                  # a local machine's devices: one task
    tasks = dataclasses.replace(problem, simulation=dataclasses.replace(
        problem.simulation, device_task=np.arange(problem.n_devices)))
    for posed in (problem, tasks):
        devices, facts = inference.place(posed, budget=1, start="random")
        assert facts["policy"] == inference.pretrained_policy() == inference.PRETRAINED
        assert devices.shape == (posed.n_groups,) and facts["objective_us"] > 0
    config = checkpoints.read_log(f"{inference.PRETRAINED}/training.json")["config"]
    assert config.get("candidate_features") is None


def test_one_trained_policy_places_2_5_and_16_devices(trained, cnn_on_devices):
    """Trained on 2 and 3 devices, it runs unchanged on 2, 5 and 16."""
    for n, problem in cnn_on_devices.items():
        greedy = inference.greedy_placement(problem, trained)
        devices, value, walk, end = (greedy.devices, greedy.value, greedy.objectives,
                                     greedy.end_value)
        assert devices.shape == (problem.n_groups,) and devices.max() < n
        assert len(walk) == 1 + (problem.allowed.sum(axis=1) - 1).sum()   # rows' simulations
        assert value == walk.min() <= end


@pytest.mark.parametrize("restart", ["previous", "fixed"])
def test_fine_tuning_walks_on_from_where_its_episodes_ended(trained, policy_problems,
                                                            monkeypatch, restart):
    """By default each fine-tuning episode starts where the one before ended (the walks go
    on improving one placement), the first from the greedy walk's start, not where its last
    pass ended; "fixed" starts every one from the start placement. The policy's own
    configuration is kept otherwise."""
    configs, firsts = [], []
    real_trainer = training.Trainer

    def recording(problems, out, config, initial=None):
        configs.append(config)
        firsts.append(initial[0])
        return real_trainer(problems, out, config, initial=initial)

    monkeypatch.setattr(training, "Trainer", recording)
    problem = policy_problems[0]
    start = np.zeros(problem.n_groups, np.int64)
    walk = inference.greedy_placement(problem, trained, start, passes=2)
    kwargs = {} if restart == "previous" else {"restart": restart}
    inference.fine_tuned_placement(problem, trained, 1, initial=start, greedy=walk, **kwargs)
    logged = checkpoints.read_log(f"{trained}/training.json")["config"]
    assert [c.restart for c in configs] == [restart]
    assert walk.end_devices.any()           # the walk ended elsewhere than its start
    np.testing.assert_array_equal(firsts[0], start)
    assert configs[0].embedding == logged["embedding"] and configs[0].rounds == logged["rounds"]
