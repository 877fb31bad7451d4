"""What the command's tests share: the example graph as `inspect --json` lists it, and a
model whose step fails."""

import json

import pytest

from tests.helpers import run_cli


@pytest.fixture(scope="session")
def inspected(mlp_model):
    result = run_cli("inspect", mlp_model, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="session")
def failing_model(tmp_path_factory):
    """A SavedModel that loads and imports fine, but whose step fails when it runs."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    path = str(tmp_path_factory.mktemp("failing") / "model")
    with tf.Graph().as_default(), tf1.Session() as session:
        x = tf1.placeholder(tf.float32, [4], name="x")
        y = tf.debugging.check_numerics(tf.math.log(x - 100.0), "boom", name="y")
        builder = tf1.saved_model.Builder(path)
        builder.add_meta_graph_and_variables(session, ["serve"], signature_def_map={
            "serving_default": tf1.saved_model.predict_signature_def({"x": x}, {"y": y})})
        builder.save()
    return path
