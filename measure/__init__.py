"""Benchmark scripts that print figures (`python -m measure.NAME`); the measurement library
itself is tf_placeto.measure. The library's progress (the "tf_placeto" logger) goes to stderr."""

import logging
import sys

_progress = logging.StreamHandler(sys.stderr)
_progress.setFormatter(logging.Formatter("%(message)s"))
logging.getLogger("tf_placeto").addHandler(_progress)
logging.getLogger("tf_placeto").setLevel(logging.INFO)
logging.getLogger("tf_placeto").propagate = False     # absl gives the root logger a handler


def say(message: str) -> None:
    """Progress of a benchmark script, on stderr: stdout keeps only its figures."""
    print(message, file=sys.stderr, flush=True)
