"""JSON-lines logs (results, journals, real runs) that a killed writer cannot spoil.

An append is one whole line, fsync'd, that starts on a fresh line (a record after a torn one
is kept); a reader skips the lines it cannot read, names the file in one line and writes it
back without them, so a damaged log heals. The logs of a folder share one lock.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Callable

from tf_placeto.files import FileLock, makedirs_private, write_atomically

log = logging.getLogger(__name__)


def append_record(path: str, record: dict) -> None:
    """Append `record` as one JSON line, whole (one write, fsync'd), under the log's lock
    (a file only this user reads: logs are the cache's).
    A file whose last line was torn by a killed writer first gets the newline it lacks, so
    this record is never glued to the torn one."""
    append_records(path, [record])


def append_records(path: str, records) -> None:
    """append_record for several records in one write."""
    text = "".join(json.dumps(record) + "\n" for record in records)
    if not text:
        return
    makedirs_private(os.path.dirname(os.path.abspath(path)))
    with FileLock(_lock_path(path)), os.fdopen(
            os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600), "rb+") as file:
        file.seek(0, os.SEEK_END)
        if file.tell():
            file.seek(-1, os.SEEK_END)
            if file.read(1) != b"\n":
                text = "\n" + text
        file.write(text.encode("utf-8"))
        file.flush()
        os.fsync(file.fileno())


def read_records(path: str, valid: Callable[[dict], bool] = lambda record: True) -> list:
    """The records of a JSON-lines log that parse as objects for which `valid` holds; []
    without the file. Lines that do not (torn by a killed writer, garbage, another shape) are
    named in one warning and the log is written back without them, so a damaged log heals
    and later appends start clean."""
    if not os.path.isfile(path):
        return []
    records, bad = _parsed_lines(path, valid)
    if bad:
        log.warning(f"skipped {bad} unreadable line{'s' if bad > 1 else ''} of {path}; "
                    "kept the rest")
        with FileLock(_lock_path(path)):
            records, bad = _parsed_lines(path, valid)     # as it is now, under the lock
            if bad:
                write_atomically(path, lambda file: file.write(
                    "".join(json.dumps(record) + "\n" for record in records)), private=True)
    return records


def _parsed_lines(path: str, valid) -> tuple:
    records, bad = [], 0
    with open(path, "rb") as file:
        for line in file:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or not valid(record):
                    raise ValueError("another shape")
            except (ValueError, TypeError, KeyError, IndexError, AttributeError):
                bad += 1
                continue
            records.append(record)
    return records, bad


def _lock_path(path: str) -> str:
    """One lock for the logs of a folder: appends are short, and a log that comes and goes
    (a measurement's journal) leaves no lock file of its own behind."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), ".logs.lock")
