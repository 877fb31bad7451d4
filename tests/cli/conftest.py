"""What the command's tests share: the example graph as `inspect --json` lists it, the
command run in this process, and a model whose step fails."""

import json
import os

import pytest

from tests.helpers import run_cli


@pytest.fixture(scope="session")
def inspected(mlp_model):
    result = run_cli("inspect", mlp_model, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def cli_here(capfd, monkeypatch):
    """Run the command's main() in this process: (exit status, its stderr). For input refused
    before any work: the same lines as the command, without starting TensorFlow again."""
    from tf_placeto import cli

    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS"):      # main() sets defaults
        monkeypatch.setenv(name, os.environ.get(name, ""))

    def run(*args):
        capfd.readouterr()
        try:
            code = cli.main(list(args))
        except SystemExit as exited:               # refused by the argument parser
            code = exited.code
        return code, capfd.readouterr().err
    return run


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
