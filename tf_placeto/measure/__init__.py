"""Measurement, in the order of the data path: the step simulator (simulator/), the runtimes
that run placed graphs for real (runtimes/: this process, local worker processes, existing
clusters), the cost model that a profile stores (costs/), placements timed for real in turns
(evaluation/), and profiling, which builds the cost model from real runs and fits the
simulator to them (profiling/)."""
