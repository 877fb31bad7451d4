"""What the Placeto policy sees and does, declared before any data flows (TF-Agents' habit).

One observation describes one step of an episode: the graph (its groups and its edges, as a
list: no padding, no adjacency matrix), the placement so far, which group is being placed
now, and one row per device saying what putting that group there would mean. Sizes are left
open (None): a graph of any number of groups, on any number of devices, is one observation,
and the network scores each device with the same weights, so no device has a fixed slot.
The action is the device for the current group.

Per-group features (Placeto's state, each scaled by its maximum over the graph):
  0 compute time, 1 output bytes, 2 memory, 3 simulated start time relative to the current
  group's (over the step time), 4 already visited in this episode, 5 being placed now.

Per-device features of the current group (a list scheduler's view of the groups visited so
far, policy/candidates.py): times over the graph's total work, log-scaled where they span
decades, and fractions:
  0 when the group could start there, 1 when it would finish there, 2 how far that finish is
  behind the earliest of any device (in the group's own run times), 3 when the device is
  free, 4 the group's run time there, 5 the device's compute so far, 6 its memory with the
  group over its capacity, 7 the share of the group's bytes (in and out) that stay on it,
  8 the group sits there now, 9 the share of the group's parents there, 10 what the step
  would pay once for the device's task if no visited group used that task yet (a RunGraph
  call per step for a worker other than the session's, as fitted by the calibration).
And from the op-level simulator (policy/episode.py), the whole placement with the group moved
there, every other group where it sits now, in the group's own run times (signed log):
  11 the change of the objective over the placement as it is (negative: faster), 12 how far
  the objective is behind the best device's.
And 13, what the group's edges would cost to cross with the group there and each other group
where it sits now (latency, bytes over bandwidth, the receiver's extra cost of a remote input;
log-scaled over the group's run time): a cluster's tasks pay much more per crossing than one
machine's devices do, and the device rows alone did not tell the policy so.
Columns are appended last, so a policy trained on fewer of them reads the first ones
(TrainingConfig.candidate_features).
"""

from __future__ import annotations

import numpy as np

COMPUTE, OUTPUT_BYTES, MEMORY, START, VISITED, CURRENT = range(6)
NUM_FEATURES = 6
(CAN_START, WOULD_FINISH, BEHIND_BEST, FREE_AT, RUN_TIME, DEVICE_WORK, MEMORY_USE, BYTES_KEPT,
 SITS_THERE, PARENTS_THERE, TASK_COST, STEP_CHANGE, STEP_BEHIND_BEST, CROSSING) = range(14)
NUM_CANDIDATE_FEATURES = 14
LARGEST_DEVICE_INDEX = 2**15 - 1    # the action spec's bound, not a limit anyone meets


def observation_spec():
    from tf_agents.specs import array_spec  # heavy: tf-agents, for the modules that use it

    return {
        "features": array_spec.ArraySpec((None, NUM_FEATURES), np.float32, "features"),
        "edges": array_spec.ArraySpec((None, 2), np.int32, "edges"),         # (src, dst)
        "ancestors": array_spec.ArraySpec((None,), np.float32, "ancestors"),  # of the current
        "descendants": array_spec.ArraySpec((None,), np.float32, "descendants"),
        "group_device": array_spec.ArraySpec((None,), np.int32, "group_device"),
        "candidates": array_spec.ArraySpec((None, NUM_CANDIDATE_FEATURES), np.float32,
                                           "candidates"),
        "device_mask": array_spec.ArraySpec((None,), np.float32, "device_mask"),
    }


def action_spec():
    from tf_agents.specs import array_spec  # heavy: tf-agents, for the modules that use it

    return array_spec.BoundedArraySpec((), np.int32, 0, LARGEST_DEVICE_INDEX, "device")


def example_spec():
    """Fixed small sizes (3 groups, 2 edges, 2 devices) with indices bounded to them: what
    TF-Agents builds a network on, drawing a random observation from its input spec, where the
    open sizes and unbounded indices of observation_spec() cannot be drawn."""
    from tf_agents.specs import array_spec  # heavy: tf-agents, for the modules that use it

    groups, edges, devices = 3, 2, 2
    return {
        "features": array_spec.ArraySpec((groups, NUM_FEATURES), np.float32),
        "edges": array_spec.BoundedArraySpec((edges, 2), np.int32, 0, groups - 1),
        "ancestors": array_spec.ArraySpec((groups,), np.float32),
        "descendants": array_spec.ArraySpec((groups,), np.float32),
        "group_device": array_spec.BoundedArraySpec((groups,), np.int32, 0, devices - 1),
        "candidates": array_spec.ArraySpec((devices, NUM_CANDIDATE_FEATURES), np.float32),
        "device_mask": array_spec.ArraySpec((devices,), np.float32),
    }
