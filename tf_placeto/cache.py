"""Where tf_placeto keeps what it builds and measures, and how it writes there safely.

The root is $TF_PLACETO_CACHE, else $XDG_CACHE_HOME/tf_placeto, else ~/.cache/tf_placeto (the
XDG base directory convention). Files are written whole or not at all: a run killed while
writing leaves the old file or none, never a part that a later run would take for a result.
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Optional, Sequence

from tf_placeto.errors import RuntimeFailure


def cache_dir(*parts: str) -> str:
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    root = os.environ.get("TF_PLACETO_CACHE") or os.path.join(base, "tf_placeto")
    return os.path.join(root, *parts)


def write_atomically(path: str, write) -> None:
    """Call `write(file)` on a temporary sibling of `path` (text), then rename it onto `path`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)


def build_once(path: str, module: str, arguments: Sequence[str], what: str,
               cwd: Optional[str] = None) -> str:
    """A SavedModel at `path`, built now by `python -m module *arguments TARGET` in a child
    process (so the builder's TensorFlow state never leaks into this one) if none is there.
    The child writes into a staging sibling that is renamed onto `path`: a killed build leaves
    nothing, and of two concurrent builds one wins."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}-", dir=os.path.dirname(path))
    target = os.path.join(staging, "model")
    try:
        result = subprocess.run([sys.executable, "-m", module, *arguments, target],
                                capture_output=True, text=True, cwd=cwd,
                                env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
        if result.returncode != 0:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeFailure(f"{what}: building it failed: {last}")
        os.replace(target, path)
    except OSError:
        if not os.path.isfile(os.path.join(path, "saved_model.pb")):  # not a concurrent build
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
