"""Shared fixtures: bundled example SavedModels (cached under .cache/) and small helpers."""

import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")     # as the tf-placeto command: tf-agents needs it
os.environ.setdefault("TF_PLACETO_CACHE", os.path.join(REPO, ".cache"))


@pytest.fixture
def cli_here(capfd, monkeypatch):
    """Run the tf-placeto command's main() in this process, as `tests.helpers.run_cli` runs it
    in a new one, without starting Python and TensorFlow again (7 s a run here): a
    CompletedProcess with the exit status and what it printed. run_cli stays for what only a
    new process shows (the entry point, TensorFlow's native log, signals)."""
    import subprocess

    from tf_placeto import cli

    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_USE_LEGACY_KERAS"):      # main() sets defaults
        monkeypatch.setenv(name, os.environ.get(name, ""))

    def run(*args):
        capfd.readouterr()
        try:
            code = cli.main(list(args))
        except SystemExit as exited:               # --help, or refused by the argument parser
            code = exited.code
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["tf-placeto", *args], code, out, err)
    return run


@pytest.fixture(scope="session")
def mlp_model():
    from tf_placeto.examples import registry

    return registry.saved_model_path("mlp")


@pytest.fixture(scope="session")
def small_cnn_model():
    from tf_placeto.examples import registry

    return registry.saved_model_path("small_cnn")


@pytest.fixture(scope="session")
def small_profiles(tmp_path_factory):
    """A profile cache the policy's fixtures share: the small models are profiled on two
    logical CPUs once a session, not once a module (nothing they run logs real runs there,
    so every module finds the same profiles)."""
    return str(tmp_path_factory.mktemp("small_profiles"))


@pytest.fixture(scope="module")
def policy_problems(small_cnn_model, mlp_model, small_profiles):
    """Two graphs, on 2 and 3 devices: problems of different sizes for one policy network."""
    import tf_placeto as tp
    from tf_placeto.measure.runtimes.runtime import Runtime
    from tf_placeto.workload import load_workload

    runtime = Runtime.local(tp.DeviceSet.local(2))
    cnn = load_workload(small_cnn_model, runtime, max_groups=12, cache=small_profiles)
    mlp = load_workload(mlp_model, runtime, max_groups=6, cache=small_profiles)
    return [cnn.problem(2), mlp.problem(3)]


@pytest.fixture(scope="session")
def two_tag_sets_model(tmp_path_factory):
    """A TF1-style SavedModel with two MetaGraphs: tags {train, gpu} fetch y = x @ w, tags
    {serve} fetch z = relu(y); only the serve graph has z."""
    import tensorflow as tf

    tf1 = tf.compat.v1
    path = str(tmp_path_factory.mktemp("tag_sets") / "model")
    with tf.Graph().as_default(), tf1.Session() as session:
        x = tf1.placeholder(tf.float32, [4, 8], name="x")
        y = tf.matmul(x, tf1.get_variable("w", [8, 8]), name="y")
        session.run(tf1.global_variables_initializer())
        builder = tf1.saved_model.Builder(path)
        builder.add_meta_graph_and_variables(session, ["train", "gpu"], signature_def_map={
            "serving_default": tf1.saved_model.predict_signature_def({"x": x}, {"y": y})})
        z = tf.nn.relu(y, name="z")
        builder.add_meta_graph(["serve"], signature_def_map={
            "serving_default": tf1.saved_model.predict_signature_def({"x": x}, {"z": z})})
        builder.save()
    return path
