"""What the Placeto policy sees and does, declared before any data flows (TF-Agents' habit).

One observation describes one step of an episode: the graph (its groups, padded to
MAX_GROUPS, and its group edges), the placement so far, and which group is being placed now.
Graphs of any size up to MAX_GROUPS groups and any number of devices up to MAX_DEVICES share
these shapes, so one network serves them all without retracing: padding is masked out.
The action is the device for the current group.

Per-group features (Placeto's state, each scaled by its maximum over the graph):
  0 compute time, 1 output bytes, 2 memory, 3 simulated start time relative to the current
  group's (over the step time), 4 already visited in this episode, 5 being placed now,
  6.. one-hot of the group's current device.
"""

from __future__ import annotations

import numpy as np

MAX_GROUPS = 128
MAX_DEVICES = 8
COMPUTE, OUTPUT_BYTES, MEMORY, START, VISITED, CURRENT = range(6)
DEVICE_ONE_HOT = 6
NUM_FEATURES = DEVICE_ONE_HOT + MAX_DEVICES


def observation_spec():
    from tf_agents.specs import array_spec  # heavy: tf-agents, for the modules that use it

    n, d = MAX_GROUPS, MAX_DEVICES
    return {
        "features": array_spec.ArraySpec((n, NUM_FEATURES), np.float32, "features"),
        "node_mask": array_spec.ArraySpec((n,), np.float32, "node_mask"),
        "adjacency": array_spec.BoundedArraySpec((n, n), np.uint8, 0, 1, "adjacency"),  # i -> j
        "ancestors": array_spec.ArraySpec((n,), np.float32, "ancestors"),   # of the current
        "descendants": array_spec.ArraySpec((n,), np.float32, "descendants"),
        "device_mask": array_spec.ArraySpec((d,), np.float32, "device_mask"),
    }


def action_spec():
    from tf_agents.specs import array_spec  # heavy: tf-agents, for the modules that use it

    return array_spec.BoundedArraySpec((), np.int32, 0, MAX_DEVICES - 1, "device")
