"""`tf_placeto.optimize()`: place a tf.function's ops on this process's devices.

    step = tf_placeto.optimize(train_step, (x, y))
    loss = step(x, y)              # same results, ops on the chosen devices
    step.report()                  # per device: ops, busy time, peak memory
    step.verdict                   # what won, or why the function stays as written

The function is traced with the example arguments, exported as a measurable step (on a copy
of its variables, see tf_placeto.functions), profiled on the devices (cached: the second
optimize() of the same function is quick), placed by a method (default "auto": the shipped
Placeto policy briefly fine-tuned and the algorithmic placers, best simulated step wins), and
measured before and after, for real where the devices are in this process. Variables stay on
the device they live on, and so do the ops that read and update them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import os
import shutil
import sys
import tempfile
import warnings
from typing import Optional, Sequence, Union

import pandas as pd

from tf_placeto import methods, pipeline
from tf_placeto.devices import canonical_device
from tf_placeto.errors import DeviceError, InputError
from tf_placeto.functions import PlacedStep, export_step, flat_tensor_arguments
from tf_placeto.log import progress_to
from tf_placeto.placement import Placement
from tf_placeto.settings import Search, Target
from tf_placeto.workload import MemoryLimit

log = logging.getLogger(__name__)

MEASURE_MODES = ("auto", "real", "simulate")


class UnplacedCallWarning(UserWarning):
    """An optimized step was called with inputs its placement was not made for."""


def this_process_devices(kind: Optional[str] = None) -> list:
    """Canonical names of the devices the eager runtime has: its GPUs if any, else its
    (logical) CPUs, or only those of `kind`."""
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    kinds = [kind] if kind else ["GPU", "CPU"]
    for device_type in kinds:
        found = tf.config.list_logical_devices(device_type)
        if found:
            return [canonical_device(d.name) for d in found]
    return []


def resolve_devices(devices: Union[None, int, Sequence[str]]) -> tuple:
    """(the devices of this process to profile on, how many devices to place on): None means
    all of the local accelerator type, N the first N of them (simulated past what is
    present), names those devices."""
    present = this_process_devices()
    if devices is None:
        return present, len(present)
    if isinstance(devices, int):
        if devices < 1:
            raise DeviceError(f"a device count must be at least 1, not {devices}")
        return present[:devices], devices
    names = [canonical_device(d) for d in devices]
    here = set(this_process_devices("GPU") + this_process_devices("CPU"))
    missing = [n for n in names if n not in here]
    if missing:
        raise DeviceError(f"{', '.join(missing)} not in this process; its devices: "
                          f"{', '.join(sorted(here))} (ask for a count to simulate more)")
    return names, len(names)


@dataclasses.dataclass
class OptimizedStep:
    """The placed step: call it like the function; inspect what was decided and measured."""

    function: object                 # the tf.function (or ConcreteFunction) given
    placement: Optional[Placement]   # op of the function -> device; None: kept as written,
                                     # since no placement was measured faster
    devices: list
    method: str
    info: dict                       # what the placer said about its decision
    predicted: dict                  # {"before"|"after": simulated MeasureResult}
    measured: Optional[dict]         # {"before"|"after": real MeasureResult} or None
    verdict: str = ""                # one line: what won, or why nothing did (pipeline.run)
    limits: dict = dataclasses.field(default_factory=dict)  # what caps any gain (the same)
    _concrete: object = dataclasses.field(repr=False, default=None)
    _placed: object = dataclasses.field(repr=False, default=None)
    _signature: object = dataclasses.field(repr=False, default=None)
    _warned: set = dataclasses.field(repr=False, default_factory=set)

    def __call__(self, *args, **kwargs):
        if self._placed is None:                 # measured: no placement beat the original
            return self.function(*args, **kwargs)
        flat = flat_tensor_arguments(self._concrete, self._signature, args, kwargs)
        if flat is not None:
            return self._placed(flat)
        shapes = _shapes(args, kwargs)
        if shapes not in self._warned:
            self._warned.add(shapes)
            traced = [tuple(t.shape) for t in self._concrete.inputs[
                :len(self._concrete.inputs) - len(self._concrete.captured_inputs)]]
            warnings.warn(f"the optimized step was placed for inputs of shapes {traced}, not "
                          f"{list(shapes)}: running the original function, unplaced (call "
                          f"tf_placeto.optimize() with such inputs to place it for them)",
                          UnplacedCallWarning, stacklevel=2)
        return self.function(*args, **kwargs)

    def step_times(self) -> dict:
        """{"predicted_before_s", "predicted_after_s"[, "measured_before_s", ...]}."""
        times = {}
        for kind, results in (("predicted", self.predicted), ("measured", self.measured)):
            for when, result in (results or {}).items():
                times[f"{kind}_{when}_s"] = result.step_time_s
        return times

    def report(self):
        """A pandas DataFrame, one row per device: its ops, predicted busy time and peak
        memory of the placed step; the step times (`step_times()`) are in its `attrs`."""
        after = self.predicted["after"]
        counts = pd.Series(list((self.placement or {}).values())).value_counts()
        table = pd.DataFrame({
            "ops": [int(counts.get(d, 0)) for d in self.devices],
            "busy_s": [after.busy_s.get(d, 0.0) for d in self.devices],
            "peak_memory_bytes": [after.peak_memory_bytes.get(d, 0) for d in self.devices],
        }, index=pd.Index(self.devices, name="device"))
        table.attrs.update(self.step_times())
        return table


def _shapes(args, kwargs) -> tuple:
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    return tuple(tuple(getattr(leaf, "shape", ())) for leaf in
                 tf.nest.flatten((args, kwargs), expand_composites=True))


def optimize(function, example_args: Sequence = (), example_kwargs: Optional[dict] = None, *,
             devices: Union[None, int, Sequence[str]] = None, method: str = "auto",
             search: Optional[Search] = None, measure: str = "auto",
             memory_per_device: Optional[str] = None, cache: Optional[str] = None,
             verbose: bool = True) -> OptimizedStep:
    """Place `function` (a tf.function, traced with the example arguments) on `devices`.

    devices: None (this process's GPUs, else its logical CPUs), a count, or device names.
    method: "auto" or a name of tf_placeto.methods.names(). search: the groups, the seed,
    the objective ("latency", or "throughput": the most steps per second with calls in
    flight, as a server or an input pipeline keeps them) and the placers' options, such as
    Placeto's fine-tuning budget and policy (settings.Search). measure: "real" runs the step
    as written and the best placements on the devices (on a copy of the variables) and keeps
    a placement only if it is faster beyond the noise, "simulate" predicts both from the
    profile and keeps the best predicted placement, "auto" measures for real when all
    devices are in this process. memory_per_device, cache: as settings.Target has them.
    """
    if measure not in MEASURE_MODES:
        raise InputError(f"measure must be one of {', '.join(MEASURE_MODES)}, not {measure!r}")
    methods.spec(method)
    MemoryLimit.parse(memory_per_device)
    with _progress_on_stderr(verbose):
        concrete = _concrete_function(function, example_args, example_kwargs or {})
        profiled_on, count = resolve_devices(devices)
        present = count == len(profiled_on)
        if measure == "real" and not present:
            raise DeviceError(f"measure='real' needs the devices in this process: {count} "
                              f"asked for, {len(profiled_on)} here")
        export_dir = tempfile.mkdtemp(prefix="tf-placeto-step-")
        try:
            step_model = os.path.join(export_dir, "step")
            pins = export_step(concrete, step_model)
            target = Target(devices=",".join(profiled_on),
                            memory_per_device=memory_per_device, cache=cache)
            outcome = pipeline.run(step_model, target, method, search,
                                   measure=present and measure != "simulate", pins=pins,
                                   n_devices=None if present else count)
        finally:
            shutil.rmtree(export_dir, ignore_errors=True)
        if outcome.verdict:
            log.info(outcome.verdict)
        if not present:
            log.info("only %d of the %d devices are in this process: the placed step runs "
                     "where TensorFlow's soft placement puts the missing ones",
                     len(profiled_on), count)
        in_function = {op.name for op in concrete.graph.get_operations()}
        own = None if outcome.placement is None else Placement(
            {name: device for name, device in outcome.placement.items() if name in in_function})
        before_after = outcome.measured_before_after
        result = OptimizedStep(
            function=function, placement=own, devices=list(outcome.problem.device_names),
            method=method, info=dict(outcome.decided.info),
            predicted=dict(zip(("before", "after"), outcome.predicted)),
            measured=dict(zip(("before", "after"), before_after)) if before_after else None,
            verdict=outcome.verdict, limits=dict(outcome.limits),
            _concrete=concrete, _placed=None if own is None else PlacedStep(concrete, own),
            _signature=_python_signature(function))
        log.info("step %s", ", ".join(f"{key[:-2].replace('_', ' ')} {value * 1e3:.2f} ms"
                                      for key, value in result.step_times().items()))
    return result


def _progress_on_stderr(verbose: bool):
    """With `verbose`, the "tf_placeto" logger's progress goes to stderr during the call,
    unless the program has given that logger handlers of its own."""
    if not verbose or logging.getLogger("tf_placeto").handlers:
        return contextlib.nullcontext()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("tf_placeto: %(message)s"))
    return progress_to(handler)


def _concrete_function(function, example_args, example_kwargs):
    import tensorflow as tf  # heavy: loaded on first use, not with the package

    if isinstance(function, tf.types.experimental.ConcreteFunction):
        return function
    if not hasattr(function, "get_concrete_function"):
        raise InputError("optimize() takes a tf.function (decorate the step with "
                         "@tf.function) or a ConcreteFunction")
    return function.get_concrete_function(*example_args, **example_kwargs)


def _python_signature(function):
    """The traced Python function's signature, to order a call's arguments as tracing did."""
    python_function = getattr(function, "python_function", None)
    return inspect.signature(python_function) if python_function is not None else None
