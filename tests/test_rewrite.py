"""Write-back: the placed copy runs, gives the same outputs, and its ops run where asked.

"Where asked" is read from TensorFlow's own step stats of a fully traced run on several
logical CPU devices (tf_placeto.measure.runtimes.runner), not from the protos we wrote.
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import tf_placeto as tp
from tests.helpers import round_robin, tree_digest
from tf_placeto.errors import SourceError
from tf_placeto.graph.sources import load_source
from tf_placeto.measure.runtimes.runner import run_traced

CPU0, CPU1 = "/device:CPU:0", "/device:CPU:1"


def _check_traced_devices(traced, placement):
    """Every placed op that ran under its own name ran on its placed device."""
    ran = {name: traced.node_devices[name] for name in placement if name in traced.node_devices}
    wrong = {n: (placement[n], d) for n, d in ran.items() if d != placement[n]}
    assert not wrong, list(wrong.items())[:5]
    assert len(ran) > len(placement) / 2          # most ops keep their names when they run
    return ran


def test_saved_model_round_robin_runs_where_asked(small_cnn_model, tmp_path):
    before = tree_digest(small_cnn_model)
    graph = tp.import_graph(small_cnn_model)
    placement = round_robin(tp.group(graph, max_groups=16))
    out = str(tmp_path / "placed")
    result = tp.apply_placement(graph, placement, out)
    assert result.out == out and len(result.placement) == len(graph)

    original, placed = run_traced(small_cnn_model), run_traced(out)
    np.testing.assert_allclose(placed.outputs["loss"], original.outputs["loss"], rtol=1e-6)
    ran = _check_traced_devices(placed, result.placement)
    assert set(ran.values()) == {CPU0, CPU1}
    assert tree_digest(small_cnn_model) == before          # the source is never modified


def test_saved_model_keeps_variables_signatures_and_a_valid_fingerprint(mlp_model, tmp_path):
    graph = tp.import_graph(mlp_model)
    out = str(tmp_path / "placed")
    tp.apply_placement(graph, round_robin(tp.group(graph, max_groups=4)), out)
    assert sorted(os.listdir(os.path.join(out, "variables"))) == \
        sorted(os.listdir(os.path.join(mlp_model, "variables")))
    assert load_source(out).meta_graph.signature_def.keys() == \
        load_source(mlp_model).meta_graph.signature_def.keys()
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    fingerprinting.ReadSavedModelFingerprint(out)           # raises if missing or unreadable


def test_placed_variables_are_recorded_for_the_tf2_loader(mlp_model, tmp_path):
    graph = tp.import_graph(mlp_model)
    variable = next(op.name for op in graph.ops if op.type == "VarHandleOp")
    result = tp.apply_placement(graph, {variable: CPU1}, str(tmp_path / "placed"))
    saved = [n.variable for n in result.proto.meta_graphs[0].object_graph_def.nodes
             if n.WhichOneof("kind") == "variable" and n.variable.device]
    assert [v.device for v in saved] == [CPU1]


class _TwoCalls(tf.Module):
    @tf.function
    def layer(self, x):
        return tf.sin(tf.matmul(x, x))

    @tf.function(input_signature=[tf.TensorSpec([3, 3], tf.float32)])
    def step(self, x):
        return {"y": self.layer(x) + self.layer(x * 2.0)}


def test_one_function_called_twice_can_go_to_two_devices(tmp_path):
    source = str(tmp_path / "two_calls")
    module = _TwoCalls()
    tf.saved_model.save(module, source, signatures={"step": module.step})
    graph = tp.import_graph(source)
    sines = sorted(op.name for op in graph.ops if op.type == "Sin")
    assert len(sines) == 2
    placement = {}
    for sine, device in zip(sines, (CPU0, CPU1)):
        prefix = sine.rsplit("/", 1)[0] + "/"
        placement.update({op.name: device for op in graph.ops if op.name.startswith(prefix)})
    out = str(tmp_path / "placed")
    result = tp.apply_placement(graph, placement, out)
    names = [f.signature.name for f in result.proto.meta_graphs[0].graph_def.library.function]
    assert any("_placeto" in n for n in names)               # the second call got a clone
    original, placed = run_traced(source), run_traced(out)
    np.testing.assert_allclose(placed.outputs["y"], original.outputs["y"], rtol=1e-6)
    assert [placed.node_devices[s] for s in sines] == [CPU0, CPU1]


def _tf1_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 4], name="x")
        a = tf.math.sin(x, name="a")
        b = tf.math.cos(x, name="b")
        tf.add(tf.matmul(a, b, name="ab"), 1.0, name="out")
    return g.as_graph_def()


def _run_tf1(graph_def, num_cpus=2):
    """Run a GraphDef's "out" on logical CPUs with full tracing; (value, {node: device})."""
    from tf_placeto.measure.runtimes.step_stats import node_devices

    config = tf.compat.v1.ConfigProto(device_count={"CPU": num_cpus}, allow_soft_placement=False)
    metadata = tf.compat.v1.RunMetadata()
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=g, config=config) as session:
            value = session.run("out:0", {"x:0": np.eye(4, dtype=np.float32)},
                                options=tf.compat.v1.RunOptions(trace_level=3),
                                run_metadata=metadata)
    return value, node_devices(metadata)


@pytest.mark.parametrize("suffix, write", [
    (".pb", lambda gd, p: open(p, "wb").write(gd.SerializeToString())),
    (".pbtxt", lambda gd, p: tf.io.write_graph(gd, os.path.dirname(p), os.path.basename(p))),
])
def test_graph_def_files_keep_their_format(tmp_path, suffix, write):
    source = str(tmp_path / f"graph{suffix}")
    write(_tf1_graph(), source)
    out = str(tmp_path / f"placed{suffix}")
    tp.apply_placement(source, {"a": CPU0, "b": CPU1, "ab": CPU1}, out)
    assert load_source(out).text_format == (suffix == ".pbtxt")
    placed_graph_def = load_source(out).graph_def
    value, devices = _run_tf1(placed_graph_def)
    expected, _ = _run_tf1(_tf1_graph())
    np.testing.assert_allclose(value, expected)
    assert (devices["a"], devices["b"], devices["ab"]) == (CPU0, CPU1, CPU1)


def test_meta_graph_def_file(tmp_path):
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(_tf1_graph(), name="")
        source = str(tmp_path / "model.meta")
        tf.compat.v1.train.export_meta_graph(filename=source)
    out = str(tmp_path / "placed.meta")
    tp.apply_placement(source, {"b": CPU1}, out)
    placed = load_source(out)
    assert placed.kind == "meta_graph_def"
    assert {n.name: n.device for n in placed.graph_def.node}["b"] == CPU1


def test_out_must_not_be_or_hold_the_source(mlp_model, tmp_path):
    with pytest.raises(SourceError, match="is SOURCE"):
        tp.apply_placement(mlp_model, {}, mlp_model)
    with pytest.raises(SourceError, match="contain one another"):
        tp.apply_placement(mlp_model, {}, os.path.join(mlp_model, "inner"))
    existing = tmp_path / "existing"
    existing.mkdir()
    with pytest.raises(SourceError, match="--overwrite"):
        tp.apply_placement(mlp_model, {}, str(existing))
    tp.apply_placement(mlp_model, {}, str(existing), overwrite=True)      # empty: nothing lost
    assert os.path.isfile(existing / "saved_model.pb")


def test_overwrite_replaces_only_what_tf_placeto_writes(mlp_model, tmp_path):
    """A placed SavedModel over an earlier one; never over a folder or file of the user's."""
    earlier = str(tmp_path / "placed")
    tp.apply_placement(mlp_model, {}, earlier)
    placed = tp.apply_placement(mlp_model, {}, earlier, overwrite=True).placement
    assert load_source(earlier).kind == "saved_model" and placed is not None
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the user's")
    (tmp_path / "graph.txt").write_text("not a graph")
    (tmp_path / "variables_mixed").mkdir()
    tp.apply_placement(mlp_model, {}, str(tmp_path / "variables_mixed"), overwrite=True)
    (tmp_path / "variables_mixed" / "variables" / "thesis.tex").write_text("chapter 1")
    before = {name: tree_digest(str(tmp_path / name))
              for name in ("work", "graph.txt", "variables_mixed")}
    for name, says in (("work", "holds notes.txt"), ("graph.txt", "a SavedModel folder"),
                       ("variables_mixed", "variables/thesis.tex")):
        with pytest.raises(SourceError, match=f"is not .*{says}.*replaces only what"):
            tp.apply_placement(mlp_model, {}, str(tmp_path / name), overwrite=True)
    graph_file = str(tmp_path / "graph.pb")
    with open(graph_file, "wb") as f:
        f.write(_tf1_graph().SerializeToString())
    with pytest.raises(SourceError, match="not a GraphDef or MetaGraphDef file"):
        tp.apply_placement(graph_file, {}, str(tmp_path / "graph.txt"), overwrite=True)
    tp.apply_placement(graph_file, {"b": CPU1}, str(tmp_path / "placed.pb"))
    tp.apply_placement(graph_file, {"b": CPU0}, str(tmp_path / "placed.pb"), overwrite=True)
    assert {n.name: n.device for n in load_source(str(tmp_path / "placed.pb")).graph_def.node
            }["b"] == CPU0
    assert before == {name: tree_digest(str(tmp_path / name)) for name in before}
    assert sorted(os.listdir(tmp_path)) == ["graph.pb", "graph.txt", "placed", "placed.pb",
                                           "variables_mixed", "work"]    # no staging left


def test_links_in_a_saved_model_are_copied_as_links_never_followed(mlp_model, tmp_path):
    source = tmp_path / "model"
    shutil.copytree(mlp_model, source)
    (tmp_path / "vocab.txt").write_text("a\nb\n")
    (source / "assets").mkdir(exist_ok=True)
    os.symlink(str(tmp_path / "vocab.txt"), source / "assets" / "vocab.txt")
    os.symlink("vocab.txt", source / "assets" / "alias.txt")
    out = tmp_path / "placed"
    tp.apply_placement(str(source), {}, str(out))
    assert os.readlink(out / "assets" / "vocab.txt") == str(tmp_path / "vocab.txt")
    assert os.readlink(out / "assets" / "alias.txt") == "vocab.txt"
    os.symlink("../../vocab.txt", source / "assets" / "climbs.txt")
    with pytest.raises(SourceError, match="climbs.txt links to ../../vocab.txt, outside"):
        tp.apply_placement(str(source), {}, str(tmp_path / "placed2"))
    assert not os.path.exists(tmp_path / "placed2")


class _TwoSignatures(tf.Module):
    @tf.function
    def inner(self, x):
        return tf.sin(tf.matmul(x, x))

    @tf.function(input_signature=[tf.TensorSpec([3, 3], tf.float32)])
    def a(self, x):
        return {"y": self.inner(x)}

    @tf.function(input_signature=[tf.TensorSpec([3, 3], tf.float32)])
    def b(self, x):
        return {"y": self.inner(x) * 2.0}


def test_placing_one_signature_leaves_the_others_ops_alone(tmp_path):
    module = _TwoSignatures()
    source = str(tmp_path / "two_signatures")
    tf.saved_model.save(module, source, signatures={"a": module.a, "b": module.b})
    graph = tp.import_graph(tp.Source(source, signature="a"))
    result = tp.apply_placement(graph, {op.name: CPU1 for op in graph.ops if op.type == "Sin"},
                                str(tmp_path / "placed"))
    assert len(result.placement) == 1
    placed_a = tp.import_graph(tp.Source(str(tmp_path / "placed"), signature="a"))
    placed_b = tp.import_graph(tp.Source(str(tmp_path / "placed"), signature="b"))
    assert [op.requested_device for op in placed_a.ops if op.type == "Sin"] == [CPU1]
    assert [op.requested_device for op in placed_b.ops if op.type == "Sin"] == [""]


def test_a_text_saved_model_stays_text(mlp_model, tmp_path):
    from google.protobuf import text_format

    source = tmp_path / "text_model"
    import shutil

    shutil.copytree(mlp_model, source, ignore=shutil.ignore_patterns("saved_model.pb"))
    (source / "saved_model.pbtxt").write_text(text_format.MessageToString(
        load_source(mlp_model).proto))
    graph = tp.import_graph(str(source))
    out = tmp_path / "placed"
    tp.apply_placement(graph, round_robin(tp.group(graph, max_groups=4)), str(out))
    assert (out / "saved_model.pbtxt").is_file() and not (out / "saved_model.pb").exists()
    placed = run_traced(str(out))
    np.testing.assert_allclose(placed.outputs["loss"], run_traced(mlp_model).outputs["loss"])
