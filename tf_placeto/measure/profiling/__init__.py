"""Profiling: a graph's per-op costs and links from traced real runs, then the simulator
fitted to real steps of diverse placements (the calibration stored with the profile)."""
