"""What a placer declares about itself, so that nothing else has to list it.

A placer module ends with `PLACER = PlacerSpec(...)`: its name, its `place` function, its
options (the command line's flags, their help and their checks are made from them), whether
it is fast, whether method "auto" tries it, how it treats a memory limit, its time limit and
where it comes in reports. `discover` collects the specs of a package's modules.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from typing import Callable, Optional

from tf_placeto.errors import InputError, PlacetoError

MEMORY_KINDS = ("replans", "simulates", "one_device")


@dataclasses.dataclass(frozen=True)
class Option:
    """One setting of a placer, as the command line, optimize() and compare() name it.

    least / above: the smallest value allowed, inclusive or not (None: no bound). auto: its
    value within method auto when none is given (None: the placer's default). quick: a value
    with which the placer decides within seconds on a small graph (tests rely on it)."""

    flag: str                      # e.g. "--rnn-budget"; without the dashes, the surface name
    keyword: str                   # the placer's keyword argument, e.g. "budget"
    type: Callable = str
    default: object = None         # the placer's own default, for the help text
    help: str = ""
    choices: tuple = ()
    least: Optional[float] = None
    above: Optional[float] = None
    metavar: Optional[str] = None
    auto: object = None
    quick: object = None

    @property
    def name(self) -> str:
        """The option's surface name: its flag as argparse stores it (--rnn-budget: rnn_budget)."""
        return self.flag.lstrip("-").replace("-", "_")

    def check(self, value) -> None:
        """Raise InputError when `value` is out of the option's range or choices."""
        if self.choices and value not in self.choices:
            raise InputError(f"{self.flag} must be one of {', '.join(map(str, self.choices))},"
                             f" not {value!r}")
        if self.least is not None and value < self.least:
            raise InputError(f"{self.flag} must be at least {self.least:g}, not {value:g}")
        if self.above is not None and value <= self.above:
            raise InputError(f"{self.flag} must be above {self.above:g}, not {value:g}")


@dataclasses.dataclass(frozen=True)
class PlacerSpec:
    """A placement method. place(problem, *, seed=0, **keywords) returns a device index per
    group, or that and a dict of facts about the decision (for reports).

    fast: decides in about a second, deterministically, without learning or solving: its
    decisions are the starts of the searching placers (common.fast_decisions). auto: method
    "auto" tries it. memory: "replans" (under a memory limit, run.place plans again on smaller
    budgets until the simulator finds a fit), "simulates" (it judges memory in the simulator
    itself: run once) or "one_device" (one device is what it means: never re-planned).
    time_limit_s: seconds its decision may take unless the caller says (None: no limit).
    workload: keywords the workload supplies (e.g. the expert's "layers"). order: its place
    in reports, smallest first. objectives: the objectives (PlacementProblem.objective) it
    follows; empty for a placer that optimises neither and decides alike under both."""

    name: str
    place: Callable
    help: str
    order: int
    options: tuple = ()
    fast: bool = False
    auto: bool = False
    memory: str = "replans"
    time_limit_s: Optional[float] = None
    workload: tuple = ()
    objectives: tuple = ()

    @property
    def direct(self) -> bool:
        """Decides without a search budget or a time limit: no options, no time_limit_s (the
        benchmarks' "best algorithm" is the best of these)."""
        return not self.options and self.time_limit_s is None

    def __post_init__(self):
        if self.memory not in MEMORY_KINDS:
            raise ValueError(f"placer {self.name}: memory must be one of "
                             f"{', '.join(MEMORY_KINDS)}, not {self.memory!r}")


@functools.lru_cache(maxsize=None)
def discover(package_name: str) -> tuple:
    """The PLACER of every module of the package (modules without one are not placers), in
    report order; two placers of one name are an error. Scanned once per package."""
    package = importlib.import_module(package_name)
    found = {}                     # name -> (spec, module)
    for module in pkgutil.iter_modules(package.__path__, f"{package_name}."):
        spec = getattr(importlib.import_module(module.name), "PLACER", None)
        if spec is None:
            continue
        if spec.name in found:
            raise PlacetoError(f"two placers are named {spec.name!r}: {found[spec.name][1]} "
                               f"and {module.name}")
        found[spec.name] = (spec, module.name)
    return tuple(sorted((spec for spec, _ in found.values()), key=lambda spec: spec.order))
