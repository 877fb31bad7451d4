"""The graph-embedding network: one set of weights for graphs of any size."""

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.specs import tensor_spec
from tf_agents.utils import common

from tf_placeto.policy import specs
from tf_placeto.policy.episode import Episode
from tf_placeto.policy.network import PlacetoNetwork
from tf_placeto.policy.observation import GraphView


def test_one_network_places_graphs_of_any_size_without_retracing(policy_problems):
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
