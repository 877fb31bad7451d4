"""`import tf_placeto` works before or after TensorFlow, with Keras 3 or legacy Keras."""

import textwrap

import pytest

from tests.helpers import run_python

_USE = """
import tensorflow as tf
graph = tf_placeto.import_graph(tf.function(lambda x: tf.nn.relu(x) * 2.0),
                                tf.TensorSpec([3], tf.float32))
print(len(graph))
"""


@pytest.mark.parametrize("first", [
    "import tf_placeto",
    "import tensorflow\nimport tf_placeto",
    "import os\nos.environ.pop('TF_USE_LEGACY_KERAS', None)\nimport keras\nimport tf_placeto",
    "import os\nos.environ['TF_USE_LEGACY_KERAS'] = '1'\nimport tensorflow\nimport tf_placeto",
])
def test_import_in_any_order(first):
    result = run_python(first + "\n" + _USE)
    assert int(result.stdout.split()[-1]) > 0


def test_importing_the_package_loads_no_tensorflow_and_sets_nothing():
    result = run_python(textwrap.dedent("""
        import os, sys
        before = dict(os.environ)
        import tf_placeto
        print("tensorflow" in sys.modules, dict(os.environ) == before)
    """))
    assert result.stdout.split() == ["False", "True"]
