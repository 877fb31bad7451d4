"""A static estimate of each op's work, for balancing groups before anything is profiled.

Convolutions and matrix products dominate a training step; their FLOPs follow from shapes.
Every other op is counted by the elements it writes. The profiler's measured costs replace
this estimate wherever they exist.
"""

from __future__ import annotations

import math

import numpy as np

from tf_placeto.graph.op_graph import OpGraph

# op type -> (index of the input holding the filter (None: the op's output is the filter),
#             index of the input whose elements are the "output" side, None: the op's output)
_CONV_LIKE = {
    "Conv2D": (1, None), "_FusedConv2D": (1, None), "_MklNativeFusedConv2D": (1, None),
    "Conv2DBackpropInput": (1, 2), "Conv2DBackpropFilter": (None, 2),
    "Conv3D": (1, None), "Conv3DBackpropInputV2": (1, 2), "Conv3DBackpropFilterV2": (None, 2),
    "DepthwiseConv2dNative": (1, None), "DepthwiseConv2dNativeBackpropInput": (1, 2),
    "DepthwiseConv2dNativeBackpropFilter": (None, 2),
}
_MATMUL = ("MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")


def estimate_work(graph: OpGraph) -> np.ndarray:
    """Estimated FLOPs (or elements written) per op; at least 1 each."""
    input_shapes = [{slot: tensor.shape for slot, tensor in inputs.items()}
                    for inputs in graph.input_tensors()]
    work = np.ones(len(graph.ops), dtype=np.float64)
    for op in graph.ops:
        out_shape = op.outputs[0].shape if op.outputs else None
        estimate = None
        if op.type in _CONV_LIKE:
            filter_at, volume_at = _CONV_LIKE[op.type]
            filt = out_shape if filter_at is None else input_shapes[op.index].get(filter_at)
            volume = out_shape if volume_at is None else input_shapes[op.index].get(volume_at)
            if _known(filt) and _known(volume):
                taps = math.prod(filt[:-2]) if op.type.startswith("Depthwise") else math.prod(filt[:-1])
                estimate = 2.0 * math.prod(volume) * taps
        elif op.type in _MATMUL:
            a = input_shapes[op.index].get(0)
            if _known(a) and _known(out_shape) and len(a) >= 2:
                attrs = op.node_def.attr   # read with `in`: indexing a proto map inserts the key
                transposed = any(attrs[a].b for a in ("transpose_a", "adj_x") if a in attrs)
                inner = a[-2] if transposed else a[-1]
                estimate = 2.0 * math.prod(out_shape) * inner
        if estimate is None:
            estimate = sum(math.prod(t.shape) for t in op.outputs if _known(t.shape))
        work[op.index] = max(1.0, float(estimate))
    return work


def _known(shape) -> bool:
    return shape is not None and all(d is not None for d in shape)
