"""The dtypes, shapes and sizes of a NodeDef's outputs, from its OpDef or its function's
signature: what the importer gives each op, and what the simulator sizes tensors by.

Ops inside function bodies carry their shapes (`_output_shapes`); the top-level nodes of a
plain GraphDef do not, so TensorFlow's shape inference is asked for theirs.
"""

from __future__ import annotations

from typing import Optional

from tf_placeto.errors import SourceError, first_line
from tf_placeto.graph.op_graph import OpGraph, TensorInfo


def _op_def(op_type: str):
    # heavy: loaded on first use, not with the package
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op_type)
    if op_def is None:
        raise SourceError(f"op type {op_type!r} is not registered in this TensorFlow "
                          "(a custom op whose library is not loaded?)")
    return op_def


def _attr(node, op_def, name):
    if name in node.attr:
        return node.attr[name]
    for a in op_def.attr:
        if a.name == name and a.HasField("default_value"):
            return a.default_value
    raise SourceError(f"node {node.name!r} ({node.op}) lacks attribute {name!r}")


def _output_layout(node, functions) -> list:
    """[(output arg name, [dtype enum per tensor])] for a node, from its OpDef or function."""
    if node.op in functions:
        layout = []
        for arg in functions[node.op].signature.output_arg:
            if not arg.type and arg.type_attr not in node.attr:
                raise SourceError(f"call {node.name!r} lacks attribute {arg.type_attr!r}")
            dtype = arg.type if arg.type else node.attr[arg.type_attr].type
            layout.append((arg.name, [dtype]))
        return layout
    op_def = _op_def(node.op)
    layout = []
    for arg in op_def.output_arg:
        if arg.type_list_attr:
            dtypes = list(_attr(node, op_def, arg.type_list_attr).list.type)
        else:
            dtype = arg.type if arg.type else _attr(node, op_def, arg.type_attr).type
            count = _attr(node, op_def, arg.number_attr).i if arg.number_attr else 1
            dtypes = [dtype] * count
        layout.append((arg.name, dtypes))
    return layout


def output_slot(node, arg_name: str, index: int, functions) -> int:
    """The flat output index of `arg_name:index`, as a function body names a node's output
    (an output arg of a list type spans several tensors)."""
    offset = 0
    for name, dtypes in _output_layout(node, functions):
        if name == arg_name:
            return offset + index
        offset += len(dtypes)
    raise SourceError(f"node {node.name!r} ({node.op}) has no output {arg_name!r}")


def output_infos(node, functions) -> list:
    """A TensorInfo per output tensor of `node` (`functions`: the library's, by name), shaped
    by its `_output_shapes` where it has them, else of unknown shape."""
    # heavy: loaded on first use, not with the package
    from tensorflow.python.framework import dtypes as tf_dtypes

    types = [t for _, ts in _output_layout(node, functions) for t in ts]
    shapes = list(node.attr["_output_shapes"].list.shape) if "_output_shapes" in node.attr else []
    infos = []
    for k, enum in enumerate(types):
        shape = shape_tuple(shapes[k]) if k < len(shapes) else None
        infos.append(tensor_info(tf_dtypes.as_dtype(enum), shape))
    return infos


def shape_tuple(shape_proto) -> Optional[tuple]:
    if shape_proto.unknown_rank:
        return None
    return tuple(d.size if d.size >= 0 else None for d in shape_proto.dim)


def tensor_info(dtype, shape) -> TensorInfo:
    """dtype keeps a `_ref` suffix (TF1 variables: colocation needs it); size uses the base."""
    base = dtype.base_dtype
    nbytes = None
    if shape is not None and all(d is not None for d in shape) and base.is_numpy_compatible \
            and base.name not in ("string", "resource", "variant"):
        count = 1
        for d in shape:
            count *= d
        nbytes = count * base.size
    return TensorInfo(dtype=dtype.name, shape=shape, nbytes=nbytes)


def fill_missing_top_level_shapes(graph: OpGraph, graph_def) -> None:
    """Top-level nodes of a plain GraphDef carry no shapes: ask TensorFlow's shape inference."""
    missing = [op for op in graph.ops if op.scope is None and op.outputs
               and any(t.shape is None for t in op.outputs)
               and "_output_shapes" not in op.node_def.attr]
    if not missing:
        return
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    with tf.Graph().as_default() as g:
        try:
            tf.graph_util.import_graph_def(graph_def, name="")
        except (ValueError, TypeError, tf.errors.OpError) as exc:
            raise SourceError(f"TensorFlow cannot import the graph: {first_line(exc)}") from exc
        for op in missing:
            tf_op = g.get_operation_by_name(op.local_name)
            op.outputs = [tensor_info(t.dtype, _known_shape(t.shape)) for t in tf_op.outputs]


def _known_shape(shape) -> Optional[tuple]:
    if shape.rank is None:
        return None
    return tuple(shape.as_list())
