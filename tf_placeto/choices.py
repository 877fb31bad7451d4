"""What a caller may choose, with its defaults and bounds: the placement methods and their
options, the objectives, training's starts and settings of devices, the bundled examples.

The command line builds its flags and help from these, so that a new placer or example is
offered there without an edit; a Python caller lists them here.
"""

from __future__ import annotations

from typing import Optional

from tf_placeto.devices import MAX_LOGICAL_CPUS
from tf_placeto.examples import registry
from tf_placeto.measure.profiling.fitting import CALIBRATION_PLACEMENTS
from tf_placeto.methods import AUTO, check_options, spec
from tf_placeto.methods import names as method_names
from tf_placeto.methods import options as placer_options
from tf_placeto.methods import specs as method_specs
from tf_placeto.placers.corpus_problems import SETTINGS
from tf_placeto.placers.problem import IN_FLIGHT, OBJECTIVES
from tf_placeto.policy.starts import IMITATE_WHERE, START_KINDS
from tf_placeto.workload import MemoryLimit

__all__ = ["AUTO", "CALIBRATION_PLACEMENTS", "IMITATE_WHERE", "IN_FLIGHT", "MAX_LOGICAL_CPUS",
           "OBJECTIVES", "SETTINGS", "START_KINDS", "check_placing", "describe_memory_limit",
           "example_families", "examples", "method_names", "method_specs", "placer_options"]


def check_placing(method: Optional[str], options: Optional[dict]) -> None:
    """Refuse an unknown method (None: none named) or a placer option (by the names of
    placer_options()) out of its range, before a runtime starts or a graph is profiled."""
    check_options(options)
    if method is not None:
        spec(method)


def describe_memory_limit(text: str) -> str:
    """A memory limit per device as place(memory_per_device=...) reads `text`, in words."""
    return MemoryLimit.parse(text).describe()


def examples() -> dict:
    """{NAME: what it is} of the bundled graphs, SOURCE examples:NAME (large ones too)."""
    return {name: registry.get(name).description for name in registry.names(include_large=True)}


def example_families() -> dict:
    """{FAMILY: (members, what they are)}: member K is SOURCE examples:FAMILY-K, drawn with
    seed K, and examples:FAMILY stands for them all where training takes graphs."""
    return {family: (len(members), registry.family_description(family))
            for family, members in registry.families().items()}
