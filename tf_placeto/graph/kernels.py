"""Which device types have a kernel for an op, from TensorFlow's own kernel registry.

A kernel registration names a device type and type constraints (e.g. the GPU kernel of an op
only for float types); an op can only run where some registration matches its attributes.
"""

from __future__ import annotations

import functools
from typing import Optional

# Registrations under DEFAULT serve any device type.
_ANY_DEVICE = "DEFAULT"


@functools.lru_cache(maxsize=None)
def _registrations(op_type: str) -> tuple:
    """((device type, label, ((attr, allowed dtype enums), ...)), ...) for an op type."""
    # heavy: loaded on first use, not with the package
    from tensorflow.python.framework import kernels

    try:
        kernel_list = kernels.get_registered_kernels_for_op(op_type)
    except Exception:  # the registry may not know the op at all (a function name, say)
        return ()
    return tuple(
        (k.device_type, k.label,
         tuple((c.name, frozenset(c.allowed_values.list.type)) for c in k.constraint))
        for k in kernel_list.kernel)


def kernel_device_types(node_def) -> Optional[frozenset]:
    """Device types with a kernel matching this node, or None if the registry cannot say."""
    registrations = _registrations(node_def.op)
    if not registrations:
        return None
    label = node_def.attr["_kernel"].s.decode() if "_kernel" in node_def.attr else ""
    types = set()
    for device_type, kernel_label, constraints in registrations:
        if kernel_label != label:
            continue
        if all(_allowed(node_def, attr, allowed) for attr, allowed in constraints):
            if device_type == _ANY_DEVICE:
                return None
            types.add(device_type)
    return frozenset(types)


def _allowed(node_def, attr: str, allowed: frozenset) -> bool:
    if attr not in node_def.attr:
        return True  # a defaulted attribute: the registry's default kernels cover it
    value = node_def.attr[attr]
    if value.HasField("list"):
        return all(t in allowed for t in value.list.type)
    return value.type in allowed
