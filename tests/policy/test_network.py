"""The graph-embedding network: one set of weights for graphs of any size and any number of
devices, each device scored alike."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec

from tf_placeto.policy import specs
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.network import PlacetoNetwork
from tf_placeto.policy.observation import GraphView


@pytest.fixture(scope="module")
def probabilities():
    """observation -> the untrained network's probabilities (one network, traced once for
    the specs' open sizes)."""
    observation_spec = tensor_spec.from_spec(specs.observation_spec())
    network = PlacetoNetwork(observation_spec, tensor_spec.from_spec(specs.action_spec()),
                             embedding=8, rounds=2)
    network.create_variables()
    call = tf.function(lambda observation: network(observation)[0].probs_parameter(),
                       input_signature=[tensor_spec.add_outer_dims_nest(observation_spec,
                                                                        (None,))])
    probabilities = lambda observation: call(   # noqa: E731
        {k: tf.constant(v[None]) for k, v in observation.items()})[0].numpy()
    probabilities.call = call
    return probabilities


def _midway(problem, seed=0):
    """An observation halfway through an episode of random moves."""
    episode = Episode(GraphView(problem))
    rng = np.random.default_rng(seed)
    while episode.position < problem.n_groups // 2:
        episode.move(int(rng.integers(problem.n_devices)))
    return episode.observation()


def test_one_network_places_graphs_of_any_size_on_any_number_of_devices(
        probabilities, policy_problems, cnn_on_devices):
    problems = list(policy_problems) + [cnn_on_devices[n] for n in (5, 16)]
    for problem in problems:
        p = probabilities(_midway(problem))
        assert p.shape == (problem.n_devices,)
        assert p.sum() == pytest.approx(1.0, rel=1e-5)
    assert probabilities.call.experimental_get_tracing_count() == 1


def test_swapping_two_interchangeable_devices_swaps_the_probabilities(probabilities,
                                                                       cnn_on_devices):
    problem = cnn_on_devices[5]
    assert problem.interchangeable
    observation = _midway(problem, seed=1)
    swap = np.array([0, 3, 2, 1, 4])            # devices 1 and 3 trade names
    swapped = dict(observation, group_device=swap[observation["group_device"]].astype(np.int32),
                   candidates=observation["candidates"][swap],
                   device_mask=observation["device_mask"][swap])
    before, after = probabilities(observation), probabilities(swapped)
    assert not np.allclose(before, before[swap])       # the swap is not trivially the same
    np.testing.assert_allclose(after, before[swap], rtol=1e-5, atol=1e-7)


def test_a_group_never_gets_a_device_without_its_kernel(probabilities, cnn_on_devices):
    problem = cnn_on_devices[5]
    compute = problem.compute_us.copy()
    compute[:, 2] = np.inf                              # no group has a kernel on device 2
    barred = dataclasses.replace(problem, compute_us=compute)
    episode = Episode(GraphView(barred))
    while not episode.done:
        p = probabilities(episode.observation())
        assert p[2] < 1e-12
        episode.move(2)                                 # asked anyway: the move is ignored
    assert not (episode.devices == 2).any()


def test_the_path_from_the_step_change_adds_its_weight_times_minus_the_change(
        policy_problems):
    """A network with the path scores each device as the same network without it, less the
    path's weight times the device's simulated step change; 0 leaves the scores alone."""
    observation_spec = tensor_spec.from_spec(specs.observation_spec())
    network = PlacetoNetwork(observation_spec, tensor_spec.from_spec(specs.action_spec()),
                             embedding=8, rounds=2)
    network.create_variables()
    observation = _midway(policy_problems[0])
    batch = {k: tf.constant(v[None]) for k, v in observation.items()}
    logits = lambda: network(batch)[0].logits.numpy()[0]     # noqa: E731
    change = observation["candidates"][:, specs.STEP_CHANGE]
    assert np.abs(change).max() > 0        # some device's move changes the simulated step
    without = logits()
    assert float(network.step_change_weight) == 0.0
    network.step_change_weight.assign(1.5)
    np.testing.assert_allclose(logits(), without - 1.5 * change, rtol=1e-5, atol=1e-5)
    narrow = PlacetoNetwork(observation_spec, tensor_spec.from_spec(specs.action_spec()),
                            embedding=8, rounds=2, candidate_features=specs.STEP_CHANGE,
                            step_change_weight=1.0)
    narrow.create_variables()
    assert not [v for v in narrow.trainable_variables if "step_change" in v.name]
    with pytest.raises(ValueError, match="no path"):
        narrow.step_change_weight
