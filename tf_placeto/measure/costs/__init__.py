"""The cost model: per-op profiles of real runs, the links and messages between tasks, and
the calibration that fits the simulator to real steps."""
