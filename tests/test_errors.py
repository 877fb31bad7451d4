"""errors.first_line: the line of TensorFlow's message that says what went wrong."""

import tensorflow as tf

from tf_placeto.errors import first_line

# What a session on a local cluster raised for a Keras LSTM whose body was placed over two
# tasks (before write-back inlined such bodies), as TensorFlow 2.21 words it.
CLUSTER_MESSAGE = """Graph execution error:

From /job:worker/replica:0/task:0:
Cannot assign a device for operation while/enter/_8: {{node while/enter/_8}} was explicitly \
assigned to /job:worker/replica:0/task:1/device:CPU:0 but available devices are \
[ /job:worker/replica:0/task:0/device:CPU:0 ]. Make sure the device specification refers to a \
valid device.
\t [[while/enter/_8]]
\t [[StatefulPartitionedCall/StatefulPartitionedCall/sequential/lstm/PartitionedCall]]"""


def test_a_cluster_error_names_the_op_and_devices_and_the_task_that_raised_it():
    line = first_line(tf.errors.InvalidArgumentError(None, None, CLUSTER_MESSAGE))
    assert line.startswith("Cannot assign a device for operation while/enter/_8")
    assert "available devices are" in line
    assert line.endswith("(on /job:worker/replica:0/task:0)")


def test_headers_and_tracebacks_are_skipped_and_a_bare_message_kept():
    oom = "Graph execution error:\n\nDetected at node 'x' defined at:\n  File \"a.py\", line 1\n" \
          "OOM when allocating tensor with shape[4,4]"
    assert first_line(tf.errors.ResourceExhaustedError(None, None, oom)) \
        == "OOM when allocating tensor with shape[4,4]"
    assert first_line(ValueError("plain")) == "plain"
    assert first_line(ValueError("")) == "ValueError"
