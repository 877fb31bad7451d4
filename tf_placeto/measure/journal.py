"""The rounds of a measurement in turns, kept on disk as they are timed.

A measurement in turns can run for minutes (16 placements, up to 60 rounds). Each round's
step times, and each placement that fails, are appended (and fsync'ed) to a journal beside the
profile as soon as they are known, so a command killed half-way loses nothing: the same
measurement started again (same graph, devices, placements and settings) takes the rounds
already timed and runs only the rest. A measurement that finishes removes its journal, so the
next one times afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Optional, Sequence

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
        reason)}. A torn last line (a killed run) is skipped."""
        rounds, failures, elapsed_s = [], {}, 0.0
        if not os.path.isfile(self.path):
            return rounds, failures, elapsed_s
        with open(self.path, encoding="utf-8") as journal:
            for line in journal:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "round" in entry and len(entry["round"]) == self.count:
                    rounds.append(entry["round"])
                    elapsed_s = float(entry["elapsed_s"])
                elif "failed" in entry:
                    failures[int(entry["failed"])] = (entry["status"], entry["reason"])
        return rounds, failures, elapsed_s

    def record_round(self, times_s: Sequence[Optional[float]], elapsed_s: float) -> None:
        self._append({"round": list(times_s), "elapsed_s": elapsed_s})

    def record_failure(self, index: int, status: str, reason: str) -> None:
        self._append({"failed": index, "status": status, "reason": reason})

    def finish(self) -> None:
        """The measurement is complete: the next one starts afresh."""
        if os.path.exists(self.path):
            os.remove(self.path)

    def _append(self, entry: dict) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as journal:
            journal.write(json.dumps(entry) + "\n")
            journal.flush()
            os.fsync(journal.fileno())
