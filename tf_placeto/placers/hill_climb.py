"""Hill climbing in the simulator: from the best fast decision, move groups to another device
wherever the op-level simulator (PlacementProblem.evaluate, under the problem's objective) says
the step or stream gets faster, until no such move is left or the time limit ends.

The fast placers each follow one model of a step (a list schedule, a cut, a load bound); the
simulator that judges them sees more (op-level overlap, copies, the session's work). Single
moves judged by it close much of that gap (docs/results/hill-climbing.md, "Hill climbing in
the simulator").

Single moves stop where a group is only worth moving with its neighbours: on the four-branch
model, the AddN that joins the chains sat on the other task from the output, and moving it
alone adds a crossing while moving it with the Identity after it removes one. So when a sweep
of single moves finds nothing, a sweep of chain moves follows: a group moves to a device that
holds one of its neighbours, then, up to MAX_CHAIN groups in all, the neighbour of the moved
ones whose move to the same device the simulator likes best (even if the chain is slower so
far), and the best prefix is taken if it is faster (ejection chains; Fiduccia-Mattheyses
passes do the same over a whole partition).

Memory counts first: a move is taken when it lowers the simulated memory excess, or keeps it
and shortens the time by more than MIN_GAIN.
"""

from __future__ import annotations

import time

import numpy as np

from tf_placeto.placers.common import fast_decisions, link_bytes
from tf_placeto.placers.problem import OBJECTIVES, PlacementProblem
from tf_placeto.placers.registry import PlacerSpec

TIME_LIMIT_S = 30.0
MIN_GAIN = 1e-4     # a relative gain smaller than this is the simulator's rounding, not a move
MAX_CHAIN = 4       # groups that one chain move takes to a device at most


def place(problem: PlacementProblem, *, seed: int = 0,
          time_limit: float = TIME_LIMIT_S) -> tuple:
    """seed: unused (deterministic). time_limit: seconds for the whole decision."""
    deadline = time.monotonic() + time_limit
    name, decision = min(fast_decisions(problem), key=lambda c: _score(problem, c[1]))
    decision, info = climb(problem, decision, deadline)
    return decision, {"start": name, **info}


def climb(problem: PlacementProblem, decision: np.ndarray, deadline: float,
          max_chain: int = MAX_CHAIN) -> tuple:
    """(decision, info) from `decision`: sweeps of single moves, then a sweep of chain moves
    of up to `max_chain` groups (1: none) whenever single moves find nothing, until neither
    does (converged) or `deadline` (monotonic) passes."""
    climber = _Climber(problem, decision, deadline, max_chain)
    converged, chains = False, False
    while not converged and not climber.out_of_time():
        moved = climber.chain_sweep() if chains else climber.single_sweep()
        converged = chains and not moved and not climber.out_of_time()
        chains = not moved
    return climber.decision, {"moves": climber.moves, "chain_moves": climber.chain_moves,
                              "sweeps": climber.sweeps, "evaluations": climber.evaluations,
                              "converged": converged}


class _Climber:
    """The decision being climbed, its score, and what the climb has spent."""

    def __init__(self, problem: PlacementProblem, decision: np.ndarray, deadline: float,
                 max_chain: int):
        self.problem, self.deadline, self.max_chain = problem, deadline, max_chain
        self.decision, self.score = decision.copy(), _score(problem, decision)
        self._links = link_bytes(problem)     # neighbours: groups that exchange tensors
        self.moves = self.chain_moves = self.sweeps = self.evaluations = 0

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    def neighbours(self, group: int) -> np.ndarray:
        """The groups joined to `group` by an edge either way (loops' feedback included)."""
        return self._links.indices[self._links.indptr[group]:self._links.indptr[group + 1]]

    def single_sweep(self) -> bool:
        """Every group to every other device it has a kernel for, in id order; True if a move
        was taken."""
        self.sweeps += 1
        moved = False
        for group, device in self._moves():
            if self.out_of_time():
                break
            trial = self.decision.copy()
            trial[group] = device
            moved |= self._take_if_better(trial, self._evaluate(trial))
        return moved

    def chain_sweep(self) -> bool:
        """A chain move from every group to every other device that holds a neighbour of it
        (a chain from inside a device's part only cuts more edges); True if one was taken."""
        self.sweeps += 1
        moved = False
        for group, device in self._moves():
            if self.out_of_time():
                break
            if not (self.decision[self.neighbours(group)] == device).any():
                continue
            trial, trial_score = self._best_chain(group, device)
            if self._take_if_better(trial, trial_score):
                moved, self.chain_moves = True, self.chain_moves + 1
        return moved

    def _best_chain(self, group: int, device: int) -> tuple:
        """The best (decision, score) of chains of 2 to max_chain groups that start with
        `group` to `device`, each next group the neighbour whose move scores best."""
        chain = self.decision.copy()
        chain[group] = device
        members, best = {group}, (None, None)
        for _ in range(self.max_chain - 1):
            frontier = [int(n) for m in members for n in self.neighbours(m)
                        if chain[n] != device and self.problem.allowed[n, device]]
            if not frontier or self.out_of_time():
                break
            scored = []
            for candidate in dict.fromkeys(frontier):
                trial = chain.copy()
                trial[candidate] = device
                scored.append((self._evaluate(trial), candidate, trial))
            trial_score, candidate, chain = min(scored, key=lambda s: s[:2])
            members.add(candidate)
            if best[1] is None or _better(trial_score, best[1]):
                best = (chain, trial_score)
        return best

    def _moves(self):
        """(group, device): every group in id order, to each other device with its kernel."""
        for group in range(self.problem.n_groups):
            for device in np.flatnonzero(self.problem.allowed[group]):
                if device != self.decision[group]:
                    yield group, int(device)

    def _evaluate(self, trial: np.ndarray) -> tuple:
        self.evaluations += 1
        return _score(self.problem, trial)

    def _take_if_better(self, trial, trial_score) -> bool:
        if trial is None or not _better(trial_score, self.score):
            return False
        self.decision, self.score, self.moves = trial, trial_score, self.moves + 1
        return True


def _score(problem: PlacementProblem, decision: np.ndarray) -> tuple:
    evaluation = problem.evaluate(decision)
    return evaluation.memory_excess_bytes, evaluation.us_per_step


def _better(trial: tuple, current: tuple) -> bool:
    if trial[0] != current[0]:
        return trial[0] < current[0]
    return trial[1] < current[1] * (1.0 - MIN_GAIN)


PLACER = PlacerSpec(
    "hill_climb", place, "group moves, single then in chains along edges, that the simulator "
    "finds faster, from the best fast decision", order=95, auto=True, memory="simulates",
    time_limit_s=TIME_LIMIT_S, objectives=OBJECTIVES)
