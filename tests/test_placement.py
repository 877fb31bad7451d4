"""Placement validation: the hard rules are checked before anything is written."""

import json

import pytest
import tensorflow as tf

import tf_placeto as tp
from tf_placeto.devices import DeviceSet
from tf_placeto.errors import PlacementError


@pytest.fixture(scope="module")
def graph(mlp_model):
    return tp.import_graph(mlp_model)


def _variable_set(graph):
    groups = tp.group(graph)
    return [graph.ops[i].name for i in groups.colocation.members[groups.colocation.multi_op_sets()[0]]]


def test_a_named_op_carries_its_colocation_group(graph):
    members = _variable_set(graph)
    placed = tp.Placement({members[0]: "cpu:1"}).validate(graph, DeviceSet.this_machine())
    assert {placed[m] for m in members} == {"/device:CPU:1"}
    assert len(placed) == len(members)


def test_unknown_ops_are_named(graph):
    with pytest.raises(PlacementError, match="'no/such/op'"):
        tp.Placement({"no/such/op": "/device:CPU:0"}).validate(graph, DeviceSet.this_machine())


def test_unknown_devices_are_refused(graph):
    name = graph.ops[0].name
    with pytest.raises(PlacementError, match="does not exist"):
        tp.Placement({name: "/device:GPU:5"}).validate(graph, DeviceSet.this_machine())


def test_splitting_a_colocation_group_is_refused(graph):
    a, b = _variable_set(graph)[:2]
    with pytest.raises(PlacementError, match="must share a device"):
        tp.Placement({a: "/device:CPU:0", b: "/device:CPU:1"}).validate(
            graph, DeviceSet.this_machine())


def test_an_op_without_a_kernel_for_the_device_type_is_refused():
    g = tf.Graph()
    with g.as_default():
        tf.strings.join([tf.constant("a"), tf.constant("b")], name="join")
    graph = tp.import_graph(g.as_graph_def())
    gpus = DeviceSet.parse("/job:worker/task:0/device:GPU:0")
    with pytest.raises(PlacementError, match="'join' has no GPU kernel"):
        tp.Placement({"join": "/job:worker/task:0/device:GPU:0"}).validate(graph, gpus)


def test_json_round_trip_and_bad_files(tmp_path):
    path = tmp_path / "p.json"
    tp.Placement({"a": "/device:CPU:0"}).to_json(str(path))
    assert dict(tp.Placement.from_json(str(path))) == {"a": "/device:CPU:0"}
    path.write_text(json.dumps(["a", "b"]))
    with pytest.raises(PlacementError, match="JSON object"):
        tp.Placement.from_json(str(path))
    path.write_text("{not json")
    with pytest.raises(PlacementError, match="not valid JSON"):
        tp.Placement.from_json(str(path))


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' * 100_000, '{"a": {"b": "c"}}',
                                  '[["/device:CPU:0"]]'])
def test_json_that_nests_is_refused_before_it_is_parsed(text, tmp_path):
    """A placement is one flat object: nesting 100,000 deep would be a RecursionError."""
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(PlacementError, match="a placement is a JSON object mapping op names"):
        tp.Placement.from_json(str(path))


def test_brackets_and_quotes_inside_names_are_no_nesting(tmp_path):
    path = tmp_path / "p.json"
    names = {'a[{"b': "/device:CPU:0", 'c\\"[[': "/device:CPU:1"}
    path.write_text(json.dumps(names))
    assert dict(tp.Placement.from_json(str(path))) == names


def test_a_file_larger_than_any_placement_is_not_read_to_the_end(tmp_path, monkeypatch):
    from tf_placeto import placement

    monkeypatch.setattr(placement, "MAX_FILE_BYTES", 64)     # not 256 MiB written here
    path = tmp_path / "p.json"
    path.write_text(json.dumps({f"op{k}": "/device:CPU:0" for k in range(10)}))
    with pytest.raises(PlacementError, match="MiB, more than the placement of any graph"):
        tp.Placement.from_json(str(path))
