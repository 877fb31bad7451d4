"""Small graphs that probe a runtime: parallel chains that gain from every device, and two
stages that a pipeline overlaps across steps but not within one. Benchmarks time them; tests
check what a runtime does with them."""

from __future__ import annotations


def chains_graph(devices, chain_length: int = 8, size: int = 1024):
    """(graph, total): one chain of `chain_length` size^3 matmuls per entry of `devices`,
    summed at the end."""
    import tensorflow as tf  # heavy: loaded by the builders only

    graph = tf.Graph()
    with graph.as_default():
        ends = []
        for seed, device in enumerate(devices):
            with tf.device(device):
                weights = tf.random.normal((size, size), stddev=size ** -0.5, seed=seed)
                x = weights
                for _ in range(chain_length):
                    x = tf.matmul(x, weights)
                ends.append(tf.reduce_sum(x))
        total = tf.add_n(ends)
    return graph, total


def two_stage_model(path: str, size: int, chain: int) -> str:
    """A SavedModel at `path`: two stages of `chain` size^2 matmuls each, one after the other
    (a pipeline has nothing to overlap within a step); the second stage's ops are named stage_2."""
    import tensorflow as tf  # heavy: loaded by the builders only

    class TwoStages(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec((size, size), tf.float32)])
        def step(self, x):
            for stage in (1, 2):
                with tf.name_scope(f"stage_{stage}"):
                    for _ in range(chain):
                        x = tf.tanh(tf.matmul(x, x) / size)
            return {"out": tf.reduce_sum(x)}

    module = TwoStages()
    tf.saved_model.save(module, path, signatures={"serving_default": module.step})
    return path
