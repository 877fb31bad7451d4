"""Keep TensorFlow's native log lines off a command's stderr.

TensorFlow's C++ runtime writes lines such as "oneDNN custom operations are on" and "failed
call to cuInit" to file descriptor 2 whatever TF_CPP_MIN_LOG_LEVEL says. The command line
promises one clear line on bad input, so while it works, descriptor 2 goes to a log file and
Python's sys.stderr (our messages, progress bars) keeps writing to the real terminal.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings


def set_tensorflow_environment() -> None:
    """Defaults for a process of our own, before TensorFlow is first imported.

    TF_USE_LEGACY_KERAS=1: tf-agents (the learned placer) needs Keras 2, which only takes effect
    when set before TensorFlow loads. Users who set either variable keep their value.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


@contextlib.contextmanager
def native_stderr_to_log():
    """Send fd 2 to a temporary log; yields that log's path (read it after a failure)."""
    sys.stderr.flush()
    log = tempfile.NamedTemporaryFile(prefix="tf-placeto-", suffix=".log", delete=False)
    saved_fd = os.dup(2)
    python_stderr = sys.stderr
    sys.stderr = os.fdopen(os.dup(saved_fd), "w", buffering=1, encoding="utf-8",
                           errors="replace")
    os.dup2(log.fileno(), 2)
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield log.name
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stderr = python_stderr
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
        log.close()


def remove_log(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
