"""The placement methods: every placer that declares a PLACER (the algorithmic ones of
tf_placeto.placers, then the learned ones of tf_placeto.policy.placers), in report order, and
method "auto", which tries the candidates and keeps the best simulated under the problem's
objective (the step, or the seconds per step of a stream: PlacementProblem.evaluate).

Every list of methods, every placer option and every check of a method's name or an option's
value comes from here, so that a new placer is one module and nothing else.
"""

from __future__ import annotations

import logging
from typing import Optional

from tf_placeto.errors import InputError, PlacetoError, first_line
from tf_placeto.log import progress
from tf_placeto.placers import registry, run
from tf_placeto.placers.problem import PlacementProblem
from tf_placeto.placers.registry import PlacerSpec
from tf_placeto.placers.run import PlacerResult

log = logging.getLogger(__name__)

# "auto": the placers whose spec says auto (the shipped Placeto policy fine-tuned briefly and
# the algorithmic placers worth trying); the best simulated decision under the objective wins.
AUTO = "auto"
PACKAGES = ("tf_placeto.placers", "tf_placeto.policy.placers")


def _registry() -> dict:
    """name -> spec of every placer of PACKAGES, in report order; names and flags unique."""
    found = sorted((spec for package in PACKAGES for spec in registry.discover(package)),
                   key=lambda spec: spec.order)
    for kind, keys in (("name", [spec.name for spec in found]),
                       ("option", [option.flag for spec in found for option in spec.options])):
        repeated = sorted({key for key in keys if keys.count(key) > 1})
        if repeated:
            raise PlacetoError(f"placers share the {kind} {', '.join(repeated)}")
    return {spec.name: spec for spec in found}


_SPECS = _registry()


def specs() -> list:
    return list(_SPECS.values())


def names() -> list:
    return list(_SPECS)


def candidates() -> list:
    """The names method auto tries."""
    return [spec.name for spec in specs() if spec.auto]


def spec(name: str) -> Optional[PlacerSpec]:
    """The placer called `name` (None for AUTO, which is several); the one place a method's
    name is checked."""
    if name != AUTO and name not in _SPECS:
        raise InputError(f"unknown method {name!r}; methods: {AUTO}, {', '.join(names())}")
    return _SPECS.get(name)


def options() -> list:
    """(spec, option) of every placer option, in report order: the command line's flags."""
    return [(spec, option) for spec in specs() for option in spec.options]


def check_options(given: Optional[dict]) -> None:
    """Raise PlacetoError for an option no placer has or a value out of its option's range."""
    known = {option.name: option for _, option in options()}
    for name, value in (given or {}).items():
        if name not in known:
            raise InputError(f"unknown placer option {name!r}; options: {', '.join(known)}")
        if value is not None:
            known[name].check(value)


def keywords(placer: PlacerSpec, given: Optional[dict], facts: Optional[dict] = None,
             within_auto: bool = False) -> dict:
    """The placer's keyword arguments: the options of `given` (surface names) that are its own
    and set (within method auto, an option's auto value where none is set), and the workload
    `facts` its spec asks for (e.g. the expert's layers)."""
    values = {}
    for option in placer.options:
        value = (given or {}).get(option.name)
        value = option.auto if value is None and within_auto else value
        if value is not None:
            values[option.keyword] = value
    values.update({name: (facts or {})[name] for name in placer.workload
                   if name in (facts or {})})
    return values


def place(method: str, problem: PlacementProblem, seed: int = 0, **placer_keywords
          ) -> PlacerResult:
    """Run the placer `method` with its own keyword arguments (run.place: timed, checked,
    re-planned for memory)."""
    chosen = spec(method)
    if chosen is None:
        raise InputError(f"method {AUTO} tries several placers, each with its own keywords: "
                         "decide() runs it")
    return run.place(chosen, problem, seed=seed, **placer_keywords)


def decide(method: str, problem: PlacementProblem, seed: int = 0,
           given: Optional[dict] = None, facts: Optional[dict] = None) -> PlacerResult:
    """The decision of `method` (which may be AUTO) for `problem`, from the surface options
    `given` (surface names: budget, rnn_budget, ...) and the workload's `facts`."""
    check_options(given)
    chosen = spec(method)
    if chosen is not None:
        return run.place(chosen, problem, seed=seed, **keywords(chosen, given, facts))
    tried, steps, notes = [], {}, []
    for name in progress(candidates(), desc="auto", unit="placer", leave=False):
        log.info("auto: trying %s", name)
        try:
            decided = _candidate(spec(name), problem, seed, given, facts)
        except PlacetoError as exc:
            notes.append(f"{name}: {exc}")
            continue
        simulated = problem.evaluate(decided.group_devices)
        steps[f"{name}_us"] = simulated.us_per_step
        tried.append(((not simulated.feasible, simulated.us_per_step), decided))
    ranked = [decided for _, decided in sorted(tried, key=lambda pair: pair[0])]
    best = ranked[0]
    info = {"chosen": best.method, **steps, **best.info}
    if notes:
        info["skipped"] = "; ".join(notes)
    return PlacerResult(AUTO, best.group_devices,
                        sum(decided.decide_s for _, decided in tried), info, candidates=ranked)


def _candidate(chosen: PlacerSpec, problem: PlacementProblem, seed: int,
               given: Optional[dict], facts: Optional[dict]) -> PlacerResult:
    """One candidate of AUTO. Where it fails with the options that have an auto value (Placeto's
    fine-tuning needs tf-agents, which a process that loaded Keras 3 first cannot have), it
    tries again with the placer's defaults for them (Placeto: zero-shot)."""
    own = keywords(chosen, given, facts, within_auto=True)
    try:
        return run.place(chosen, problem, seed=seed, **own)
    except PlacetoError as exc:
        tuned = {option.keyword for option in chosen.options if option.auto is not None}
        if not tuned & set(own):
            raise
        decided = run.place(chosen, problem, seed=seed,
                            **{k: v for k, v in own.items() if k not in tuned})
        decided.info["auto_options_dropped"] = first_line(exc)
        return decided

