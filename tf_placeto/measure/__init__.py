"""Measurement: real runs of placed graphs (in-process, local worker clusters, existing
clusters), their profiles as a cost model, and the simulator that predicts from it."""
