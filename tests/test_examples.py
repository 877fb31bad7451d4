"""Bundled examples: the registry, and the Inception-V3 training step it builds."""

import pytest

import tf_placeto as tp
from examples import registry
from tf_placeto.errors import SourceError


def test_unknown_example_lists_the_known_ones():
    with pytest.raises(SourceError, match="inception_v3"):
        registry.get("resnet_9000")


def test_examples_are_saved_models_with_a_train_step(mlp_model):
    source = tp.load_source(mlp_model)
    assert source.kind == "saved_model" and source.signature == registry.SIGNATURE
    assert registry.saved_model_path("mlp") == mlp_model          # cached, not rebuilt


def test_inception_v3_training_step():
    graph = tp.import_graph("examples:inception_v3")
    types = {op.type for op in graph.ops}
    # Forward, backward and optimizer update are all there, inside the function body.
    assert {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "AssignAddVariableOp"} <= types
    assert 4_500 < len(graph) < 5_200
    groups = tp.group(graph)
    assert len(groups) <= tp.DEFAULT_MAX_GROUPS
    convs = [op for op in graph.ops if op.type == "Conv2D"]
    assert len(convs) == 94 and all(op.scope is not None for op in convs)
