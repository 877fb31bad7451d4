"""Measurement: real runs of placed graphs, traced step stats."""

import sys


def say(message: str) -> None:
    """Progress of a benchmark script, on stderr: stdout keeps only its figures."""
    print(message, file=sys.stderr, flush=True)
