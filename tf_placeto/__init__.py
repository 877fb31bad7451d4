"""tf_placeto: learn where each op of a TensorFlow graph should run.

Importing this package does not import TensorFlow (nor set any of its environment variables),
so it works the same before or after `import tensorflow`; the names below load on first use.
"""

import importlib

from tf_placeto._version import __version__

_EXPORTS = {
    "import_graph": "tf_placeto.api",
    "group": "tf_placeto.api",
    "apply_placement": "tf_placeto.api",
    "ApplyResult": "tf_placeto.api",
    "place": "tf_placeto.api",
    "PlaceResult": "tf_placeto.api",
    "profile": "tf_placeto.api",
    "measure_steps": "tf_placeto.api",
    "simulate": "tf_placeto.api",
    "calibration_report": "tf_placeto.api",
    "train": "tf_placeto.training_api",
    "TrainingPlan": "tf_placeto.training_api",
    "TrainingResult": "tf_placeto.training_api",
    "optimize": "tf_placeto.optimized_step",
    "OptimizedStep": "tf_placeto.optimized_step",
    "UnplacedCallWarning": "tf_placeto.optimized_step",
    "Source": "tf_placeto.graph.sources",
    "Target": "tf_placeto.settings",
    "Search": "tf_placeto.settings",
    "Timing": "tf_placeto.measure.evaluation.interleaved",
    "load_source": "tf_placeto.graph.sources",
    "source_path": "tf_placeto.graph.sources",
    "OpGraph": "tf_placeto.graph.op_graph",
    "GroupGraph": "tf_placeto.graph.grouping",
    "DEFAULT_MAX_GROUPS": "tf_placeto.graph.grouping",
    "DeviceSet": "tf_placeto.devices",
    "Placement": "tf_placeto.placement",
    "PlacetoError": "tf_placeto.errors",
    "InputError": "tf_placeto.errors",
    "RuntimeFailure": "tf_placeto.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tf_placeto' has no attribute {name!r}")


def __dir__():
    return __all__
