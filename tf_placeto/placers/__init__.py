"""Placers: a PlacementProblem in, one device per group out. One module per placer.

A placer is a module here (or in tf_placeto.policy.placers, for the learned ones) that ends
with `PLACER = registry.PlacerSpec(...)`: its name, its

    place(problem: PlacementProblem, *, seed: int = 0, **options) -> np.ndarray | (np.ndarray, dict)

(a device index per group, and optionally facts about the decision for reports), its options
and how it treats memory. tf_placeto.methods finds them (registry.discover); nothing else lists
them. `run.place` runs one: timed, checked against the hard rules, re-planned for memory.
"""
