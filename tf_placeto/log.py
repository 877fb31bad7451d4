"""Progress bars of long operations, all alike: tqdm on stderr, hidden off a terminal.

stdout keeps what a command prints as its result; `disable=None` shows a bar only where stderr
is a terminal, so logs and pipes get no carriage-return noise.
"""

import contextlib
import logging
import sys
import threading
import time
from typing import Optional

from tqdm import tqdm


def progress(iterable=None, **options) -> tqdm:
    """A tqdm bar (over `iterable`, or updated by hand) with tf_placeto's settings;
    `options` are tqdm's own (total, desc, unit, leave, initial)."""
    return tqdm(iterable, file=sys.stderr, disable=None, **options)


@contextlib.contextmanager
def ticking(seconds: Optional[float], desc: str):
    """A bar of the seconds spent in the block against its time limit (`seconds`; None: no
    limit), for work that reports little progress of its own, such as a solver's search;
    what it does report goes in the bar's postfix (bar.set_postfix_str)."""
    with progress(total=seconds, desc=desc, unit="s", leave=False,
                  bar_format="{desc}: {elapsed} of {total:.0f} s{postfix}" if seconds
                  else None) as bar:
        done = threading.Event()
        start = time.monotonic()

        def tick():
            while not done.wait(0.5):
                bar.n = min(time.monotonic() - start, seconds or float("inf"))
                bar.refresh()

        ticker = threading.Thread(target=tick, name="tf-placeto-progress", daemon=True)
        ticker.start()
        try:
            yield bar
        finally:
            done.set()
            ticker.join()


@contextlib.contextmanager
def progress_to(handler: logging.Handler):
    """The library's progress (the "tf_placeto" logger, INFO) goes to `handler` alone while the
    block runs: not also to the root logger, which TensorFlow's absl gives a handler too."""
    logger = logging.getLogger("tf_placeto")
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
