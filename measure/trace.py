"""Run a (placed) model for real with full tracing and read where each op ran.

The step stats of a traced Session run are TensorFlow's own record of which device executed
each node: the ground truth for "the ops run on the devices that were asked for". Runs use a
TF1 Session (tf.compat.v1), the path that reports per-node step stats, with Grappler on as in
any real run, so function bodies are inlined and nodes are named by their call path.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from tf_placeto.devices import canonical_device
from tf_placeto.graph.sources import load_source, signature_inputs


@dataclasses.dataclass
class TracedRun:
    outputs: dict            # output key -> numpy value
    op_devices: dict         # traced node name -> canonical device it ran on
    run_metadata: object     # the RunMetadata, with step_stats and partition graphs

    def ops_on(self, device: str) -> list:
        return sorted(name for name, d in self.op_devices.items() if d == device)


def example_feeds(source, seed: int = 0) -> dict:
    """Deterministic inputs for a signature: N(0,1) floats; zeros for integers and bools.

    Zeros are valid class labels and embedding ids, so any model accepts them.
    """
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    feeds = {}
    for key, (tensor_name, dtype_enum, shape_proto) in sorted(signature_inputs(source).items()):
        dtype = tf.dtypes.as_dtype(dtype_enum)
        shape = [d.size if d.size >= 0 else 1 for d in shape_proto.dim]
        if dtype.is_floating:
            value = rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
        else:
            value = np.zeros(shape, dtype=dtype.as_numpy_dtype)
        feeds[key] = (tensor_name, value)
    return feeds


def run_traced(path: str, signature: Optional[str] = None, num_cpus: int = 2,
               feeds: Optional[dict] = None, seed: int = 0) -> TracedRun:
    """Run a SavedModel's signature once on `num_cpus` logical CPUs with FULL_TRACE.

    Soft placement is off: a node that cannot run where it was placed is an error, not a
    silent move.
    """
    import tensorflow as tf

    source = load_source(path, signature=signature)
    if source.kind != "saved_model":
        raise ValueError(f"run_traced runs SavedModels; {path} is a {source.kind}")
    feeds = feeds if feeds is not None else example_feeds(source, seed)
    outputs = source.meta_graph.signature_def[source.signature].outputs
    tags = list(source.meta_graph.meta_info_def.tags)
    config = tf.compat.v1.ConfigProto(device_count={"CPU": num_cpus},
                                      allow_soft_placement=False)
    metadata = tf.compat.v1.RunMetadata()
    with tf.Graph().as_default() as graph:
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            tf.compat.v1.saved_model.loader.load(session, tags, path)
            values = session.run(
                {key: info.name for key, info in outputs.items()},
                feed_dict={tensor_name: value for tensor_name, value in feeds.values()},
                options=tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                run_metadata=metadata)
    return TracedRun(outputs=values, op_devices=_devices_from_step_stats(metadata),
                     run_metadata=metadata)


def _devices_from_step_stats(metadata) -> dict:
    devices = {}
    for dev_stats in metadata.step_stats.dev_stats:
        device = canonical_device(dev_stats.device.split(":stream")[0])
        for node in dev_stats.node_stats:
            devices[node.node_name] = device
    return devices
