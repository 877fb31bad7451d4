"""The errors a user can cause, as opposed to bugs.

Everything tf_placeto raises on bad input is a `PlacetoError`; the command line prints its
message as one line and exits non-zero, so the message must say what is wrong and what to do.
"""


class PlacetoError(Exception):
    """Bad input: a message for a person, never a traceback."""


class SourceError(PlacetoError):
    """A SOURCE that cannot be read: missing, corrupt, or without the named signature."""


class DeviceError(PlacetoError):
    """A device that does not exist or cannot be parsed."""


class PlacementError(PlacetoError):
    """A placement that names unknown ops, splits a colocation group or breaks a kernel rule."""


# Lines TensorFlow puts before the message that says what went wrong.
_HEADER_LINES = ("Graph execution error:", "Detected at node", "Detected unsupported operations")


def first_line(exc: BaseException) -> str:
    """The line of an exception's message that says what went wrong, for one-line reports.

    TensorFlow's OpErrors start with headers ("Graph execution error:", "Detected at node
    ...") and a Python traceback; the cause ("OOM when allocating tensor ...") comes later.
    """
    text = getattr(exc, "message", None) or str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    meaningful = [line for line in lines if not line.startswith(_HEADER_LINES)
                  and not line.startswith(("File ", "Traceback")) and line != "Stack trace:"
                  and any(c.isalnum() for c in line)]
    return (meaningful or lines or [type(exc).__name__])[0]
