"""Swapping two paths in one step, where the kernel can: Linux's renameat2 with
RENAME_EXCHANGE, which Python does not wrap, reached through ctypes. A folder replaced so is
never missing, not even between two renames (files.replace_path renames twice elsewhere)."""

from __future__ import annotations

import ctypes
import errno
import os


def exchange_paths(a: str, b: str) -> bool:
    """Atomically swap two paths (renameat2 RENAME_EXCHANGE); False where the kernel, the
    C library or the file system cannot."""
    renameat2 = _renameat2()
    if renameat2 is None:
        return False
    if renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) == 0:   # AT_FDCWD, EXCHANGE
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), b)


def _renameat2():
    if _renameat2.cache is None:
        try:
            function = ctypes.CDLL(None, use_errno=True).renameat2
            function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                 ctypes.c_uint]
            function.restype = ctypes.c_int
        except (AttributeError, OSError):
            function = None
        _renameat2.cache = [function]
    return _renameat2.cache[0]


_renameat2.cache = None
