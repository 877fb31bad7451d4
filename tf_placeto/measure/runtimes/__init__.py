"""Runtimes: where placed graphs really run (this process, local worker clusters, existing
clusters), the machine they run on, and the links between their devices."""
