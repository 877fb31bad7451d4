"""The errors tf_placeto reports to a person, as opposed to bugs: two kinds.

An `InputError` is bad input (a SOURCE, device, placement, file or option): fixing the input
fixes it, and the command line exits 2 with its one line. A `RuntimeFailure` is good input
whose work failed (a run, a worker, TensorFlow): the command line exits 1 and keeps
TensorFlow's log. Either way the message must say what is wrong and what to do.
"""

import re


class PlacetoError(Exception):
    """What tf_placeto reports: a message for a person, never a traceback."""


class InputError(PlacetoError):
    """Bad input: the user can fix it by changing what they gave."""


class RuntimeFailure(PlacetoError):
    """Good input whose work failed: a run, a worker process or TensorFlow."""


class SourceError(InputError):
    """A SOURCE that cannot be read: missing, corrupt, or without the named signature."""


class DeviceError(InputError):
    """A device that does not exist or cannot be parsed."""


class PlacementError(InputError):
    """A placement that names unknown ops, splits a colocation group or breaks a kernel rule."""


class MeasurementError(RuntimeFailure):
    """Running the graph to profile or measure it failed."""


# Lines TensorFlow puts before the message that says what went wrong.
_HEADER_LINES = ("Graph execution error:", "Detected at node", "Detected unsupported operations")
# A distributed runtime's header: which task raised the error ("From /job:worker/...:").
_TASK_HEADER = re.compile(r"^From (/job:\S+?):?$")


def first_line(exc: BaseException) -> str:
    """The line of an exception's message that says what went wrong, for one-line reports.

    TensorFlow's OpErrors start with headers ("Graph execution error:", "Detected at node
    ...") and a Python traceback; the cause ("OOM when allocating tensor ...") comes later.
    On a cluster, the task that raised it is named after the cause.
    """
    text = getattr(exc, "message", None) or str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    tasks = [match.group(1) for match in map(_TASK_HEADER.match, lines) if match]
    meaningful = [line for line in lines if not line.startswith(_HEADER_LINES)
                  and not _TASK_HEADER.match(line)
                  and not line.startswith(("File ", "Traceback")) and line != "Stack trace:"
                  and any(c.isalnum() for c in line)]
    cause = (meaningful or lines or [type(exc).__name__])[0]
    return f"{cause} (on {tasks[0]})" if tasks and meaningful else cause
