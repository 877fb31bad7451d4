"""Bundled examples: the registry, its graph families, and the training steps it builds.

Large graphs are built once (the registry caches them) and imported once per module.
"""

import re
import subprocess
import sys

import pytest

import tf_placeto as tp
from tests.helpers import REPO
from tf_placeto.errors import SourceError
from tf_placeto.examples import families, registry

MEMBERS = ["cifar10-3", "ptb-3", "nmt_family-3"]


@pytest.fixture(scope="module")
def graphs():
    """examples:NAME -> its op graph, each imported once."""
    cache = {}

    def graph(name):
        if name not in cache:
            cache[name] = tp.import_graph(f"examples:{name}")
        return cache[name]

    return graph


def expert_layer(rules, op_name):
    """The layer of the first expert rule matching `op_name`, None if none matches."""
    return next((layer for pattern, layer in rules if re.search(pattern, op_name)), None)


def architecture(spec):
    """A spec's architecture, without the seed that names it."""
    fields = vars(spec).copy()
    fields.pop("seed")
    return tuple(sorted(fields.items()))


def recurrent_op_types(graph):
    return {op.type for op in graph.ops if "While" in op.type}


def test_unknown_example_lists_the_known_ones():
    with pytest.raises(SourceError, match="inception_v3.*cifar10-0 .. cifar10-31"):
        registry.get("resnet_9000")


@pytest.mark.parametrize("name", ["cifar10-99", "ptb-32", "nmt_family-x", "cifar10-03",
                                  "cifar10-"])
def test_unknown_family_member_says_which_members_exist(name):
    family = name.split("-")[0]
    with pytest.raises(SourceError, match=f"examples:{name}: {family} has members "
                                          f"{family}-0 .. {family}-31"):
        registry.get(name)


def test_names_list_single_graphs_and_families_list_their_members():
    assert {"nasnet", "nmt", "inception_v3"} <= set(registry.names())
    assert "nasnet_large" not in registry.names()                 # built only when asked for
    assert "nasnet_large" in registry.names(include_large=True)
    assert registry.get("nasnet_large").large
    members = registry.families()
    assert set(members) == {"cifar10", "ptb", "nmt_family"}
    for family, names in members.items():
        assert names == [f"{family}-{k}" for k in range(32)]
        assert not set(names) & set(registry.names(include_large=True))
        example = registry.get(names[5])
        assert example.name == names[5] and example.args == (family, 5)
        assert example.description.startswith(f"{family} member 5: ")


def test_the_examples_command_lists_graphs_and_families(cli_here):
    listed = cli_here("examples")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(line.startswith("examples:nasnet_large ") for line in lines)
    for family in registry.families():
        assert any(line.startswith(f"examples:{family}-K ") and "K = 0 .. 31" in line
                   for line in lines)


@pytest.mark.parametrize("family", sorted(families.FAMILIES))
def test_family_members_are_seeded_and_all_different(family):
    specs = [families.sample(family, seed) for seed in range(families.SIZE)]
    assert specs == [families.sample(family, seed) for seed in range(families.SIZE)]
    assert len({architecture(spec) for spec in specs}) == families.SIZE


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


def test_nmt_is_unrolled_in_time(graphs):
    graph = graphs("nmt")
    assert 5_000 < len(graph) < 15_000 and not recurrent_op_types(graph)
    types = {op.type for op in graph.ops}
    assert {"MatMul", "TanhGrad", "SparseSoftmaxCrossEntropyWithLogits",
            "AssignAddVariableOp"} <= types
    # Forward and backward ops of every time step: 40 per encoder layer, per LSTM gate matmul.
    encoder_matmuls = [op for op in graph.ops if op.type == "MatMul"
                       and "/encoder_lstm_1/" in op.name and "gradient_tape" not in op.name]
    assert len(encoder_matmuls) == 2 * 40


def test_nmt_expert_rules_place_each_layer_on_its_own(graphs):
    rules = registry.get("nmt").expert_layers
    layers = {}
    for op in graphs("nmt").ops:
        role = re.search(r"/(encoder_embedding|decoder_embedding|(en|de)coder_lstm_\d|"
                         r"attention|softmax)/", op.name)
        if role:
            layers.setdefault(role.group(1), set()).add(expert_layer(rules, op.name))
    assert layers == {"encoder_embedding": {0}, "decoder_embedding": {0},
                      "encoder_lstm_0": {0}, "decoder_lstm_0": {0},
                      "encoder_lstm_1": {1}, "decoder_lstm_1": {1},
                      "attention": {1}, "softmax": {1}}


def test_expert_rules_follow_the_number_of_layers():
    rules = registry.seq2seq_expert_layers(4)
    assert expert_layer(rules, "m/decoder_lstm_3/kernel") == 3
    assert expert_layer(rules, "seq2seq/encoder_gru_2/MatMul") == 2
    assert expert_layer(rules, "gradient_tape/seq2seq/attention/MatMul") == 3
    assert expert_layer(rules, "SGD/Const") is None
    assert not registry.get("cifar10-0").expert_layers and not registry.get("nasnet").expert_layers
    member = registry.get("nmt_family-3")
    layers = len(families.sample("nmt_family", 3).cells)
    assert member.expert_layers == registry.seq2seq_expert_layers(layers)


@pytest.mark.parametrize("name", MEMBERS)
def test_family_members_are_small_real_training_steps(graphs, name):
    graph = graphs(name)
    assert 300 < len(graph) < 5_000 and not recurrent_op_types(graph)
    types = {op.type for op in graph.ops}
    assert {"MatMul", "AssignAddVariableOp"} <= types
    assert any("/gradient_tape/" in op.name for op in graph.ops)          # the backward pass


def test_members_of_a_family_differ(graphs):
    shapes = [sorted((op.type, str([t.shape for t in op.outputs])) for op in graphs(name).ops)
              for name in ("cifar10-3", "cifar10-4")]
    assert len(shapes[0]) != len(shapes[1]) and shapes[0] != shapes[1]


def test_the_same_seed_builds_the_same_graph(graphs, tmp_path):
    again = str(tmp_path / "ptb-3")
    subprocess.run([sys.executable, "-m", "tf_placeto.examples.registry", "ptb-3", again], check=True,
                   cwd=REPO, capture_output=True)
    assert [op.name for op in tp.import_graph(again).ops] == [op.name
                                                               for op in graphs("ptb-3").ops]


def test_nasnet_training_step(graphs):
    graph = graphs("nasnet")
    assert 15_000 < len(graph) < 17_500 and not recurrent_op_types(graph)
    assert {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropFilter",
            "AssignAddVariableOp"} <= {op.type for op in graph.ops}


def test_a_family_stands_for_its_members():
    assert registry.expand(["examples:cifar10", "my_model"], "0-2") == [
        "examples:cifar10-0", "examples:cifar10-1", "examples:cifar10-2", "my_model"]
    assert len(registry.expand(["examples:ptb"])) == 32
