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
