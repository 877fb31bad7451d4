"""Output dtypes, shapes and sizes: a body's recorded shapes, and sizes by the base type."""

import tensorflow as tf

import tf_placeto as tp
from tf_placeto.graph.outputs import tensor_info

SPEC = tf.TensorSpec([4, 4], tf.float32)


@tf.function
def _matmul(x):
    return tf.matmul(x, x)


@tf.function
def _calls_matmul(x):
    return _matmul(x) * 2.0


def test_tensor_sizes_come_from_shapes():
    graph = tp.import_graph(_calls_matmul, SPEC)
    matmul = next(op for op in graph.ops if op.type == "MatMul")
    assert matmul.scope is not None                  # inside a body: its recorded shapes
    assert matmul.outputs[0].shape == (4, 4)
    assert matmul.outputs[0].nbytes == 4 * 4 * 4
    assert matmul.outputs[0].dtype == "float32"


def test_a_reference_keeps_its_ref_and_only_known_shapes_of_plain_types_have_a_size():
    reference = tensor_info(tf.float32._as_ref, (2, 3))
    assert (reference.dtype, reference.nbytes) == ("float32_ref", 2 * 3 * 4)
    assert tensor_info(tf.float32, (2, None)).nbytes is None
    assert tensor_info(tf.string, (2,)).nbytes is None
