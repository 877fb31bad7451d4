"""The rounds of a measurement in turns, kept on disk as they are timed.

A measurement in turns can run for minutes (16 placements, up to 60 rounds). Each round's
step times, and each placement out of memory, are appended (and fsync'ed) to a journal beside the
profile as soon as they are known, so a command killed half-way loses nothing: the same
measurement started again (same graph, runtime, placements and settings, its timeout among
them) takes the rounds already timed and the placements out of memory, and runs only the
rest; a placement that failed otherwise (a timeout, a worker that died) is measured again. A
measurement that finishes removes its journal, so the next one times afresh.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Optional, Sequence

from tf_placeto.measure.runtimes.runner import INFEASIBLE
from tf_placeto.records import append_record, read_records

JOURNAL_DIR = "in-turns"


class RoundJournal:
    """The journal of one measurement, named by what it measures: `keys` (one per placement,
    see measurer.placement_key) and `settings` (anything that changes what a round means)."""

    def __init__(self, directory: str, keys: Sequence[str], settings: dict):
        identity = json.dumps({"keys": list(keys), **settings}, sort_keys=True)
        name = hashlib.sha256(identity.encode()).hexdigest()[:24]
        self.path = os.path.join(directory, JOURNAL_DIR, f"{name}.jsonl")
        self.count = len(keys)

    def restore(self) -> tuple:
        """(rounds, failures, elapsed seconds) kept by an earlier run: rounds[r][i] is
        placement i's time in round r (None: it was not timed), failures {i: (status,
        reason)} of the placements out of memory, which would fail again (the others are
        measured again). Lines that are not entries (a killed run's torn last line, damage)
        are skipped, named in one line and dropped from the journal (records.read_records)."""
        rounds, failures, elapsed_s = [], {}, 0.0
        for entry in read_records(self.path, self._an_entry):
            if "round" in entry:
                rounds.append(entry["round"])
                elapsed_s = float(entry["elapsed_s"])
            elif entry["status"] == INFEASIBLE:
                failures[entry["failed"]] = (entry["status"], entry["reason"])
        return rounds, failures, elapsed_s

    def _an_entry(self, entry: dict) -> bool:
        """Whether a line is a round or a failure as this journal records them."""
        if "round" in entry:
            return (len(entry["round"]) == self.count and _a_time(entry["elapsed_s"])
                    and all(time is None or _a_time(time) for time in entry["round"]))
        return (type(entry["failed"]) is int and 0 <= entry["failed"] < self.count
                and isinstance(entry["status"], str) and isinstance(entry["reason"], str))

    def record_round(self, times_s: Sequence[Optional[float]], elapsed_s: float) -> None:
        append_record(self.path, {"round": list(times_s), "elapsed_s": elapsed_s})

    def record_failure(self, index: int, status: str, reason: str) -> None:
        """Keep a placement out of memory, which would fail again; another failure is
        measured again, so it is not written."""
        if status == INFEASIBLE:
            append_record(self.path, {"failed": index, "status": status, "reason": reason})

    def finish(self) -> None:
        """The measurement is complete: the next one starts afresh."""
        if os.path.exists(self.path):
            os.remove(self.path)


def _a_time(value) -> bool:
    return type(value) in (int, float) and 0 <= value < math.inf
