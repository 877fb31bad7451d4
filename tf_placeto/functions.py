"""A tf.function's step, made measurable and run placed (what `optimize()` is built on).

Two directions, both keeping the function's own op names so that one placement fits both:

- `export_step` writes a TF1-style SavedModel whose graph is the function's graph, each
  captured variable a real variable holding its current value and one fetch per output that
  waits for all the function's side effects (the variable updates of a training step). The
  profiler and the real measurer run it like any other SavedModel, on a copy of the weights,
  so measuring never changes the caller's variables.
- `PlacedStep` imports the function's graph with devices written in into a
  `tf.compat.v1.wrap_function` that takes the function's arguments and the captured
  variables' handles: it reads and updates the caller's own variables.
"""

from __future__ import annotations

import hashlib
from typing import Optional

from tf_placeto.graph.importer import import_source
from tf_placeto.errors import InputError
from tf_placeto.rewrite import placed_proto

CAPTURE_SCOPE = "placeto_captured"     # the exported step's variables: CAPTURE_SCOPE/k
SIGNATURE = "serving_default"


def _argument_count(concrete) -> int:
    return len(concrete.inputs) - len(concrete.captured_inputs)


def captured_variables(concrete) -> list:
    """Per captured input: the tf.Variable behind it, or None for a captured plain tensor.

    Other captured resources (tables, iterators) cannot be copied into a measurable graph.
    """
    by_handle = {id(v.handle): v for v in concrete.variables}
    found = []
    for placeholder, captured in zip(concrete.inputs[_argument_count(concrete):],
                                     concrete.captured_inputs):
        variable = by_handle.get(id(captured))
        if variable is None and captured.dtype.name == "resource":
            raise InputError(f"the function captures a resource that is not a variable "
                             f"({placeholder.op.name}); optimize() handles functions whose "
                             f"captures are variables and tensors")
        found.append(variable)
    return found


def export_step(concrete, export_dir: str) -> dict:
    """Write the measurable copy of `concrete`; returns {variable op name: the caller's
    variable device}, the pins that keep each variable's ops where the variable lives."""
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    graph_def = concrete.graph.as_graph_def(add_shapes=True)
    arguments = concrete.inputs[:_argument_count(concrete)]
    captures = concrete.inputs[_argument_count(concrete):]
    control_outputs = [op.name for op in concrete.graph.control_outputs]
    # values are read here, eagerly: inside the graph below they cannot be
    values = [(captured.numpy() if variable is None else variable.numpy(), variable)
              for captured, variable in zip(concrete.captured_inputs,
                                            captured_variables(concrete))]
    pins = {}
    with tf.Graph().as_default() as graph:
        input_map, initial_values = {}, {}
        for k, (placeholder, (value, variable)) in enumerate(zip(captures, values)):
            name = f"{CAPTURE_SCOPE}/{k}"
            if variable is None:
                input_map[placeholder.name] = tf.constant(value, name=name)
                continue
            initial = tf.compat.v1.placeholder(variable.dtype, variable.shape,
                                               name=f"{name}_initial")
            copy = tf.compat.v1.Variable(initial, name=name, use_resource=True,
                                         trainable=False)
            input_map[placeholder.name] = copy.handle
            initial_values[initial] = value
            pins[copy.handle.op.name] = variable.device
        returned = tf.graph_util.import_graph_def(
            graph_def, input_map=input_map, name="",
            return_elements=[t.name for t in concrete.outputs] + control_outputs)
        outputs, side_effects = returned[:len(concrete.outputs)], returned[len(concrete.outputs):]
        with tf.control_dependencies(side_effects):
            fetches = [tf.identity(t, name=f"placeto_output_{i}") for i, t in enumerate(outputs)]
            if not fetches:
                fetches = [tf.constant(0, name="placeto_done")]
        inputs = {t.op.name: graph.get_tensor_by_name(t.name) for t in arguments}
        signature = tf.compat.v1.saved_model.predict_signature_def(
            inputs=inputs, outputs={f"output_{i}": t for i, t in enumerate(fetches)})
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer(), initial_values)
            builder = tf.compat.v1.saved_model.Builder(export_dir)
            builder.add_meta_graph_and_variables(
                session, [tf.saved_model.SERVING], signature_def_map={SIGNATURE: signature})
            builder.save()
    return pins


class PlacedStep:
    """`concrete`'s graph run with the devices of `placement` ({op name: device}).

    Called with the function's flattened tensor arguments; returns its structured outputs.
    """

    def __init__(self, concrete, placement: dict):
        import tensorflow as tf  # heavy: loaded on first use, not with the package

        graph = import_source(concrete)
        own = {name: device for name, device in placement.items() if name in graph}
        suffix = hashlib.sha256(repr(sorted(own.items())).encode()).hexdigest()[:12]
        graph_def = placed_proto(graph.source, graph, own, clone_suffix=f"_placeto_{suffix}")
        self._concrete = concrete
        inputs = [t.name for t in concrete.inputs]
        outputs = [t.name for t in concrete.outputs]
        side_effects = [op.name for op in concrete.graph.control_outputs]

        def run(*flat):
            returned = tf.graph_util.import_graph_def(
                graph_def, input_map=dict(zip(inputs, flat)), name="placed",
                return_elements=outputs + side_effects)
            with tf.control_dependencies(returned[len(outputs):]):
                return [tf.identity(t) for t in returned[:len(outputs)]]

        specs = [tf.TensorSpec(t.shape, t.dtype) for t in concrete.inputs]
        self._run = tf.compat.v1.wrap_function(run, specs)

    def __call__(self, flat_arguments: list):
        import tensorflow as tf  # heavy: loaded on first use, not with the package

        flat = self._run(*flat_arguments, *self._concrete.captured_inputs)
        return tf.nest.pack_sequence_as(self._concrete.structured_outputs, flat,
                                        expand_composites=True)


def flat_tensor_arguments(concrete, python_signature, args, kwargs) -> Optional[list]:
    """The tensors a call passes, in the order of `concrete`'s inputs; None when they do not
    fit what it was traced for (another shape, dtype or structure).

    python_signature: the traced Python function's inspect.Signature, which orders keyword
    arguments as tracing did; None for positional tensors only.
    """
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    values = [args, kwargs]
    if python_signature is not None:
        try:
            bound = python_signature.bind(*args, **kwargs)
        except TypeError:
            return None
        bound.apply_defaults()
        values = list(bound.arguments.values())
    leaves = [leaf for leaf in tf.nest.flatten(values, expand_composites=True)
              if isinstance(leaf, (tf.Tensor, tf.Variable)) or hasattr(leaf, "__array__")]
    expected = concrete.inputs[:_argument_count(concrete)]
    if len(leaves) != len(expected):
        return None
    tensors = [tf.convert_to_tensor(leaf) for leaf in leaves]
    fits = all(t.dtype == e.dtype and e.shape.is_compatible_with(t.shape)
               for t, e in zip(tensors, expected))
    return tensors if fits else None
