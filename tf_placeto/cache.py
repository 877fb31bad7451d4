"""Where tf_placeto keeps what it builds and measures: its folders, their locks, built models.

The root is $TF_PLACETO_CACHE, else $XDG_CACHE_HOME/tf_placeto, else ~/.cache/tf_placeto (the
XDG base directory convention), a folder only its user can read (0700): measurements and
logs name the user's models. Files are written whole or not at all (tf_placeto.files); each
cache entry (a profile's folder and what is kept beside it) has a lock that serialises its
writers (`entry_lock`).
"""

import hashlib
import logging
import os
import stat
import subprocess
import sys
from typing import Optional, Sequence

from tf_placeto.errors import RuntimeFailure
from tf_placeto.files import FileLock, Staging, makedirs_private, write_atomically

log = logging.getLogger(__name__)
_LOCK_FILE = ".lock"
_BUILT_FILE = ".tf-placeto-built"     # in a built SavedModel: the sha256 of its graph


def cache_dir(*parts: str) -> str:
    """A path in the cache; the cache's root exists, only its user's (0700)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    root = os.environ.get("TF_PLACETO_CACHE") or os.path.join(base, "tf_placeto")
    _private_root(root)
    return os.path.join(root, *parts)


def _private_root(root: str) -> None:
    """Make the root 0700, or tighten one that an older version made 0755 (the user's own)."""
    try:
        makedirs_private(root)
        info = os.stat(root)
        if info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(root, stat.S_IMODE(info.st_mode) & ~0o077)
    except OSError:
        pass         # a read-only or foreign root: what is written there says why it fails


def entry_lock(directory: str, what: str) -> FileLock:
    """The lock of one cache entry (a profile's folder): held while a process writes there,
    so two runs on one cache never interleave their writes or their timings of one graph."""
    makedirs_private(directory)
    return FileLock(os.path.join(directory, _LOCK_FILE), what)


def build_once(path: str, module: str, arguments: Sequence[str], what: str,
               cwd: Optional[str] = None) -> str:
    """A SavedModel at `path`, built now by `python -m module *arguments TARGET` in a child
    process (so the builder's TensorFlow state never leaks into this one) unless a whole one
    is there. The digest of its graph is kept in it: one that no longer matches (a damaged
    file) is named and built again. The child writes into a staging folder that is swapped
    in whole (tf_placeto.files.Staging); concurrent builds of one path take turns, and the
    later finds it built."""
    if _built(path):
        return path
    with FileLock(f"{path}.lock", f"another build of {what}"):
        if _built(path):
            return path
        if os.path.lexists(path):
            log.warning(f"the built {what} at {path} does not match its record (damaged, or "
                        "built by an older version); building it again")
        with Staging(path) as staging:
            target = staging.path("model")
            result = subprocess.run([sys.executable, "-m", module, *arguments, target],
                                    capture_output=True, text=True, cwd=cwd,
                                    env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
            if result.returncode != 0:
                last = (result.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeFailure(f"{what}: building it failed: {last}")
            digest = _digest(os.path.join(target, "saved_model.pb"))
            write_atomically(os.path.join(target, _BUILT_FILE), lambda file: file.write(digest))
            staging.replace("model")
    return path


def _built(path: str) -> bool:
    """Whether `path` holds a whole build: its graph's digest is the one recorded."""
    try:
        with open(os.path.join(path, _BUILT_FILE), encoding="ascii") as file:
            return file.read().strip() == _digest(os.path.join(path, "saved_model.pb"))
    except OSError:
        return False


def _digest(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
