"""Example graphs: the bundled ones (`examples:NAME`: model builders and graph families), the
real models kept apart from them that the placers were never tuned on (held_out.py), and
small graphs that probe a runtime (probes.py)."""
