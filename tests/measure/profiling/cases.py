"""A profile for the fitting tests: the estimated one, as if made on two worker processes."""

import pandas as pd

from tests.helpers import estimated_cost_model

WORKERS = ["/job:worker/replica:0/task:0/device:CPU:0",
           "/job:worker/replica:0/task:1/device:CPU:0"]


def cluster_cost_model(graph):
    """The estimated profile, as if made on two worker processes."""
    model = estimated_cost_model(graph)
    model.links = pd.DataFrame([{"src": a, "dst": b, "latency_us": 400.0, "bytes_per_us": 1000.0,
                                 "copy_share": 0.0} for a in WORKERS for b in WORKERS if a != b])
    model.meta = {"devices": WORKERS}
    return model
