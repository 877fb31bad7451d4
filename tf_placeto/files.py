"""Writing files so that nothing the user owns is lost and nothing half-written is read.

- `write_atomically`: a file written whole or not at all (a temporary sibling from `tempfile`,
  fsync'd, renamed, its folder fsync'd).
- `FileLock`: one process at a time (flock), re-entrant within a process; a process that
  must wait says so once.
- `check_output_file` / `check_output_folder`: an output path a user names, refused before
  any work when it cannot be written or lies inside what the command reads.
- `Staging` and `replace_path`: a file or folder is written into a staging folder beside
  its destination, fsync'd, then swapped in. A folder is exchanged atomically where the
  kernel can (exchange.py); elsewhere the old one is renamed aside first and renamed back on
  any failure. A staging folder is locked while its process lives: `sweep_staging` removes
  those of dead processes and, where one died between the two renames, puts the old
  destination back whole.

JSON-lines logs, built on these, are records.py's. Linux and macOS: the locks are flock(2)
locks, released by the kernel when a process dies.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from typing import Callable, Optional

from tf_placeto.errors import InputError
from tf_placeto.exchange import exchange_paths

log = logging.getLogger(__name__)

PRIVATE = 0o700
_UMASK = os.umask(0o022)          # read once, as the process starts using this module
os.umask(_UMASK)
STAGING_PREFIX = ".tf-placeto-staging-"
# Older versions' staging folders (tempfile.mkdtemp(prefix=".tf-placeto-"), no owner file),
# told from anything of the user's by their name and by holding only what they staged.
_LEGACY_STAGING = re.compile(r"^\.tf-placeto-[a-z0-9_]{8}$")
_LEGACY_ENTRIES = {"model", "graph", "replaced"}
_OWNER_FILE = ".owner"            # in a staging folder: locked while its process lives
_INTENT_FILE = "intent.json"      # in a staging folder: the swap it is doing, for a sweep
_ASIDE = "replaced"               # in a staging folder: the old destination, during a swap
# A staging folder with no owner file is one whose process died as it made it, or one of an
# older version: swept once it is this old.
_ORPHAN_AGE_S = 3600.0


def makedirs_private(path: str) -> str:
    """`path` and its missing parents as folders only this user can read (0700)."""
    missing = []
    head = os.path.abspath(path)
    while not os.path.isdir(head):
        missing.append(head)
        parent = os.path.dirname(head)
        if parent == head:
            break
        head = parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, PRIVATE)
    return path


def fsync_folder(path: str) -> None:
    """Make a folder's entries (a rename into it, a new file) survive a power loss."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as error:        # some file systems cannot sync a folder: nothing to do
        if error.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def fsync_tree(path: str) -> None:
    """fsync every file and folder under `path` (or the file), deepest first."""
    if not os.path.isdir(path) or os.path.islink(path):
        _fsync_file(path)
        return
    for root, folders, names in os.walk(path, topdown=False):
        for name in names:
            _fsync_file(os.path.join(root, name))
        fsync_folder(root)


def _fsync_file(path: str) -> None:
    if os.path.islink(path):
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, write: Callable, binary: bool = False,
                     private: bool = False) -> str:
    """Call `write(file)` on a temporary sibling of `path` (text, or bytes with `binary`),
    fsync it, rename it onto `path` and fsync the folder: a reader sees the old file or the
    new one, never a part, and a run killed while writing leaves no temporary behind that a
    later run would take for anything (its name starts with a dot and ends .tmp). The file
    gets the modes the user's umask gives, or only the user's with `private` (the cache)."""
    folder = os.path.dirname(os.path.abspath(path))
    if private:
        makedirs_private(folder)
    else:
        os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                     dir=folder)
    try:
        if not private:
            os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else
                       {"encoding": "utf-8", "newline": ""})) as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        temporary = None
        fsync_folder(folder)
    finally:
        if temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
    return path


# ---- paths a user names for output -----------------------------------------------------------
def check_output_file(path: str, what: str, keep_out_of=()) -> None:
    """Refuse, before any work, a file output (`what`: its flag) that cannot be written: its
    folder missing or not writable, a folder in its place, or inside one of `keep_out_of`
    (the SOURCE: what a command reads is never written)."""
    _check_outside(path, what, keep_out_of)
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise InputError(f"{what} {path} is a folder: give a file name")
    _check_folder_writable(os.path.dirname(real), path, what)


def check_output_folder(path: str, what: str, keep_out_of=()) -> None:
    """As check_output_file, for an output folder: an existing folder, or one that can be
    made in an existing folder."""
    _check_outside(path, what, keep_out_of)
    real = os.path.realpath(path)
    if os.path.lexists(path) and not os.path.isdir(real):
        raise InputError(f"{what} {path} exists and is not a folder")
    _check_folder_writable(real if os.path.isdir(real) else os.path.dirname(real), path, what)


def _check_outside(path: str, what: str, keep_out_of) -> None:
    real = os.path.realpath(path)
    for other in keep_out_of:
        if other is None:
            continue
        other_real = os.path.realpath(other)
        if real == other_real or real.startswith(other_real.rstrip(os.sep) + os.sep):
            raise InputError(f"{what} {path} is inside {other}, which this command reads: "
                             "write it somewhere else")


def _check_folder_writable(folder: str, path: str, what: str) -> None:
    if not os.path.isdir(folder):
        raise InputError(f"{what} {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path}: cannot write in {folder}")


# ---- locks ----------------------------------------------------------------------------------
class FileLock:
    """An exclusive lock named by a file: one process holds it at a time (flock, released by
    the kernel when the process dies), re-entrant within a process (its threads take turns).
    `what` says what waits, in the one line said when another process holds it."""

    _held: dict = {}                  # path -> [fd, count, thread lock]
    _guard = threading.Lock()

    def __init__(self, path: str, what: str = ""):
        self.path = os.path.abspath(path)
        self.what = what or f"the lock {self.path}"

    def __enter__(self) -> "FileLock":
        self.acquire()
        return self

    def __exit__(self, *exc_info) -> None:
        self.release()

    def acquire(self, wait: bool = True) -> bool:
        """Take the lock; without `wait`, only if no other process holds it (returns
        whether it was taken)."""
        with FileLock._guard:
            entry = FileLock._held.setdefault(self.path, [None, 0, threading.RLock()])
        if not entry[2].acquire(blocking=wait):
            return False
        if entry[1]:
            entry[1] += 1
            return True
        try:
            fd = _open_lock_file(self.path)
            if not _flock(fd, blocking=False):
                if not wait:
                    os.close(fd)
                    entry[2].release()
                    return False
                log.warning(f"waiting for {self.what}: another tf-placeto process "
                            f"(pid {holder_pid(self.path) or 'unknown'}) holds {self.path}")
                _flock(fd, blocking=True)
            _write_holder(fd)
        except BaseException:
            entry[2].release()
            raise
        entry[0], entry[1] = fd, 1
        return True

    def release(self) -> None:
        entry = FileLock._held[self.path]
        entry[1] -= 1
        if not entry[1]:
            fd, entry[0] = entry[0], None
            os.close(fd)          # closing the descriptor releases the flock
        entry[2].release()


def _open_lock_file(path: str) -> int:
    makedirs_private(os.path.dirname(path))
    return os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)


def _flock(fd: int, blocking: bool) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _write_holder(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)


def holder_pid(path: str) -> Optional[int]:
    """The pid written in a lock file by its holder (None: unreadable, or being written)."""
    try:
        with open(path, encoding="ascii") as file:
            return int(file.read().strip())
    except (OSError, ValueError):
        return None


def try_lock(path: str) -> Optional[int]:
    """Take the lock file at `path` for this process if no other process holds it: its open
    descriptor (close it to let go; the kernel does when the process dies), or None. Not
    re-entrant: for locks a process takes once, such as a core for its workers."""
    fd = _open_lock_file(path)
    if _flock(fd, blocking=False):
        _write_holder(fd)
        return fd
    os.close(fd)
    return None


# ---- staging and atomic replacement ---------------------------------------------------------
class Staging:
    """A staging folder beside `destination`, locked while this process lives: write the new
    file or folder into `path(name)`, then `replace(name)` swaps it in. The folder is removed
    when the block ends, whatever happens; a process killed meanwhile leaves it to
    `sweep_staging`, which the next Staging in that folder runs first."""

    def __init__(self, destination: str):
        self.destination = os.path.abspath(destination)
        self.parent = os.path.dirname(self.destination)
        self.folder = None
        self._owner = None

    def __enter__(self) -> "Staging":
        sweep_staging(self.parent)
        self.folder = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.parent)
        self._owner = os.open(os.path.join(self.folder, _OWNER_FILE),
                              os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        _flock(self._owner, blocking=True)
        _write_holder(self._owner)
        return self

    def __exit__(self, *exc_info) -> None:
        _restore(self.folder)         # interrupted between a swap's two renames
        shutil.rmtree(self.folder, ignore_errors=True)
        os.close(self._owner)

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def replace(self, name: str) -> str:
        """Swap the staged `name` in for the destination (replace_path)."""
        return replace_path(self.path(name), self.destination, self.folder)


def replace_path(staged: str, destination: str, staging_folder: str) -> str:
    """Put `staged` (a file or a folder, in `staging_folder`) where `destination` is, after
    fsyncing it whole. Nothing is lost on any failure or interruption: a file is renamed over
    the old one (atomic); a folder is exchanged with the old one where the kernel can, else
    the old one goes aside into `staging_folder` first, with a note of the swap, and comes
    back if the second rename fails (or, after a kill, at the next sweep). The old
    destination ends in `staging_folder`, removed with it."""
    fsync_tree(staged)
    parent = os.path.dirname(os.path.abspath(destination))
    if not os.path.isdir(staged) or not os.path.lexists(destination):
        os.replace(staged, destination)
    elif not exchange_paths(staged, destination):
        aside = os.path.join(staging_folder, _ASIDE)
        write_atomically(os.path.join(staging_folder, _INTENT_FILE),
                         lambda file: json.dump({"destination": destination}, file))
        os.rename(destination, aside)
        try:
            os.rename(staged, destination)
        except BaseException:
            os.rename(aside, destination)
            raise
    fsync_folder(parent)
    return destination


def sweep_staging(parent: str) -> list:
    """Remove the staging folders in `parent` whose process is gone; where one died between
    moving the old destination aside and moving the new one in, put the old one back first.
    Returns the destinations restored."""
    restored = []
    try:
        names = [name for name in os.listdir(parent) if name.startswith(STAGING_PREFIX)
                 or _is_legacy_staging(os.path.join(parent, name))]
    except OSError:
        return restored
    for name in names:
        folder = os.path.join(parent, name)
        owner = os.path.join(folder, _OWNER_FILE)
        try:
            if os.path.exists(owner):
                fd = os.open(owner, os.O_RDWR)
                try:
                    if not _flock(fd, blocking=False):
                        continue              # its process is alive: not ours to touch
                    restored += _restore(folder)
                    shutil.rmtree(folder, ignore_errors=True)
                finally:
                    os.close(fd)
            elif time.time() - os.path.getmtime(folder) > _ORPHAN_AGE_S:
                shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue
    return restored


def _is_legacy_staging(path: str) -> bool:
    """An older version's staging folder, by its exact name and contents; one that cannot be
    read (gone meanwhile) is not, and does not stop the sweep of the others."""
    if not _LEGACY_STAGING.match(os.path.basename(path)) or os.path.islink(path):
        return False
    try:
        return set(os.listdir(path)) <= _LEGACY_ENTRIES
    except OSError:
        return False


def _restore(folder: str) -> list:
    aside = os.path.join(folder, _ASIDE)
    try:
        with open(os.path.join(folder, _INTENT_FILE), encoding="utf-8") as file:
            destination = json.load(file)["destination"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if os.path.lexists(aside) and not os.path.lexists(destination):
        os.rename(aside, destination)
        fsync_folder(os.path.dirname(destination))
        log.warning(f"put {destination} back as it was: a tf-placeto process died while "
                    "replacing it")
        return [destination]
    return []
