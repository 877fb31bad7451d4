"""The placement MDP of Placeto, one episode at a time, without TF-Agents.

An episode visits every group once, in topological order (group ids are one), and each step's
action is the device for the group being visited; it starts where starts.py says. An episode's
return is how much faster its last placement is than its start. Every move is judged at op
level by the simulator: the reward is the drop in the objective (objective.py) over the
episode's first objective, which makes rewards comparable between graphs. Beside it, the
groups visited so far are list-scheduled where the episode put them (candidates.py): that is
what the observation's device rows come from, together with the simulator's answer for each
device (the placement with the current group moved there), so the move then costs no
simulation of its own. Every placement simulated is an evaluation (GraphView.moves). A walk
whose moves a policy decides one at a time (a greedy walk, imitation's walks along the
network's own moves) simulates ahead: while the policy decides a group, the next group's rows
are simulated as if the group stays where it sits (what such a walk mostly does), and are
used only if it does, so the walk's moves and figures are what they would be without it; a
look-ahead not used is cancelled and counts as nothing.
`greedy_walk` runs one greedy episode of a policy: the exported one when placing
(inference.py), the network being trained when training judges it (training.py), or
`SimulatedGreedy`, the rule that takes whichever device the simulator says is fastest, which
imitation may teach (training_api.py). Asked for several passes, it walks the groups again
from where the pass before ended: a first pass from a random start decides each group while
the groups after it still sit where chance put them, a second one decides them again beside
the policy's own choices.
"""

from __future__ import annotations

import concurrent.futures
import os
import time
from typing import NamedTuple

import numpy as np

from tf_placeto.policy import specs
from tf_placeto.policy.candidates import Candidates, add_simulated
from tf_placeto.policy.observation import GraphView


# a group's other devices are simulated side by side: the simulator's event loop runs without
# the GIL, and a row needs up to one simulation per device
_SIMULATIONS = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                                     thread_name_prefix="placeto-rows")


class Episode:
    """One pass over a problem's groups from a start placement (default: the view's fixed
    one), move by move."""

    def __init__(self, view: GraphView, start: np.ndarray = None, evaluated: tuple = None,
                 look_ahead: bool = False):
        """evaluated: (objective, simulation) of `start` where they are known already.
        look_ahead: simulate the next group's rows while the current group is decided (the
        module's doc); for walks whose moves are decided one at a time."""
        self.view = view
        self._look_ahead = look_ahead
        self._ahead = None         # (placement it assumed, futures of the next group's rows)
        if start is None:
            self.devices, self.value, self.result = (view.start.copy(), view.start_objective,
                                                     view.start_result)
        else:
            self.devices = np.asarray(start, np.int64).copy()
            self.value, self.result = evaluated or view.objective(self.devices)
        self.start = self.devices.copy()
        self.position = 0
        self.first = self.value
        self.best = (self.value, self.devices.copy())     # the best placement it evaluated
        self.candidates = Candidates(view.problem, view.scales)
        self._offers = {}          # device -> (objective, simulation) for the current group
        self._rows = self._device_rows()

    @property
    def done(self) -> bool:
        return self.position == self.view.problem.n_groups

    @property
    def moved_any(self) -> bool:
        """Whether the pass put any group elsewhere than its start did."""
        return not np.array_equal(self.devices, self.start)

    def next_pass(self) -> "Episode":
        """Another pass over the groups from where this one ended (not simulated again)."""
        return Episode(self.view, self.devices, (self.value, self.result), self._look_ahead)

    def observation(self) -> dict:
        return self.view.observation(self.devices, self.position, self.result, self._rows)

    def move(self, device: int) -> float:
        """Put the current group on `device` (ignored where it has no kernel or no device);
        the reward: the drop in the objective over the episode's first objective."""
        problem = self.view.problem
        if 0 <= device < problem.n_devices and problem.allowed[self.position, device]:
            self.devices[self.position] = device
        chosen = int(self.devices[self.position])
        self.candidates.place(self.position, chosen)
        value, self.result = self._offers[chosen]      # simulated for its row
        reward = (self.value - value) / self.first
        self.value = value
        self.position += 1
        if not self.done:      # the last observation keeps the last group's rows
            self._rows = self._device_rows()
        return reward

    def _device_rows(self) -> np.ndarray:
        """The current group's rows: the list schedule's, then the simulator's for each device
        it may use (where it sits now is the placement as it is: no simulation)."""
        group, problem = self.position, self.view.problem
        here = int(self.devices[group])
        others, placements = _others_placed(problem, self.devices, group)
        simulated = self._simulated_ahead() or _SIMULATIONS.map(self.view.objective, placements)
        rows = self.candidates.rows(group, self.devices)    # while the simulations run
        self._offers = {here: (self.value, self.result)}
        values = np.full(problem.n_devices, np.inf)
        values[here] = self.value
        for device, devices, outcome in zip(others, placements, simulated):
            self._offers[device] = outcome
            values[device] = outcome[0]
            self.view.moves.append(outcome[0])     # in device order, however they ran
            if outcome[0] < self.best[0]:
                self.best = (outcome[0], devices)
        add_simulated(rows, values, self.value, self.candidates.scales.group_us[group])
        if self._look_ahead and group + 1 < problem.n_groups:
            self._ahead = (self.devices.copy(), [
                _SIMULATIONS.submit(self.view.objective, placement)
                for placement in _others_placed(problem, self.devices, group + 1)[1]])
        return rows

    def _simulated_ahead(self):
        """The current group's simulations started ahead, if the placement they assumed is
        the episode's (in the order _device_rows asks for them); else None, and they are
        cancelled."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        assumed, futures = ahead
        if np.array_equal(assumed, self.devices):
            return (future.result() for future in futures)
        for future in futures:
            future.cancel()
        return None


def _others_placed(problem, devices: np.ndarray, group: int) -> tuple:
    """(the other devices `group` may use, `devices` with the group on each of them)."""
    here = int(devices[group])
    others = [int(d) for d in np.flatnonzero(problem.allowed[group]) if d != here]
    placements = []
    for device in others:
        placements.append(devices.copy())
        placements[-1][group] = device
    return others, placements


class GreedyWalk(NamedTuple):
    """Greedy passes of a policy: the best placement they evaluated, that placement's
    objective (us), the objective of every placement evaluated (the start first, in order),
    the placement where the last pass ended (the policy's own answer), the objective where
    each pass ended, in order (as many as the passes walked; the last is the policy's own
    answer's, `end_value`), and whether the last pass moved no group (the walk settled,
    rather than ran out of passes or time)."""
    devices: np.ndarray
    value: float
    objectives: np.ndarray
    end_devices: np.ndarray
    pass_values: tuple
    settled: bool

    @property
    def end_value(self) -> float:
        return self.pass_values[-1]

    @property
    def passes(self) -> int:
        return len(self.pass_values)


def step_changes(observation: dict) -> np.ndarray:
    """Per device, the rows' simulated step change with the group there (inf where it may
    not go): what the simulator-led rules below compare."""
    return np.where(observation["device_mask"] > 0,
                    observation["candidates"][:, specs.STEP_CHANGE], np.inf)


class SimulatedGreedy:
    """A rule, not a network, answering as a policy does: each group to the device where the
    simulated step with it there is least (the observation's rows hold that for every
    device), staying put where no device is faster. On one machine's devices one such pass
    from the random start ends a few percent behind the best algorithm, as the shipped
    network does; on a cluster's tasks, far behind it (docs/results/generalisation.md)."""

    @staticmethod
    def action(observation: dict, first: bool) -> int:
        change = step_changes(observation)
        here = int(observation["candidates"][:, specs.SITS_THERE].argmax())
        return here if change[here] <= change.min() else int(change.argmin())


class SimulatorVeto:
    """A policy corrected by the simulator, as a teacher: the policy's device, unless the
    simulator finds the step on another device shorter by more than `margin` (in the device
    rows' STEP_CHANGE units: the arcsinh of the change over the group's own run time); then
    that fastest device. Some of the network's walks stop short where it keeps a group, or
    moves it, against a single move the simulator shows paying (docs/results/
    generalisation.md, "A simulator's veto"); this teacher corrects those answers and keeps
    the others, so a cluster's gathering, which no single move shows, stays the network's."""

    def __init__(self, policy, margin: float):
        if margin < 0:
            raise ValueError(f"margin must be at least 0, not {margin}")
        self.policy, self.margin = policy, margin

    def action(self, observation: dict, first: bool) -> int:
        chosen = self.policy.action(observation, first)
        change = step_changes(observation)
        fastest = int(change.argmin())
        return fastest if change[chosen] - change[fastest] > self.margin else chosen


def greedy_walk(view: GraphView, policy, passes: int = 1, seconds: float = None) -> GreedyWalk:
    """Greedy episodes from the start of `view`, at most `passes`, each from where the one
    before ended; a pass that moves no group ends the walk (the policy answers alike in the
    same state, so another would move none either). seconds: start no pass that, at the pace
    of the passes before it, would end more than this after the walk began (None: no clock;
    the first pass is always walked). `policy` answers action(observation, first) with a
    device (SavedPolicy, or training's actor)."""
    if passes < 1:
        raise ValueError(f"passes must be at least 1, not {passes}")
    before, began = len(view.moves), time.perf_counter()
    episode, best, ends = Episode(view, look_ahead=True), None, []
    while True:
        while not episode.done:
            episode.move(policy.action(episode.observation(), first=episode.position == 0))
        ends.append(episode.value)
        walked = len(ends)
        if best is None or episode.best[0] < best[0]:
            best = episode.best
        pace = (time.perf_counter() - began) / walked
        if (walked == passes or not episode.moved_any
                or seconds is not None and pace * (walked + 1) > seconds):
            break
        episode = episode.next_pass()
    value, devices = best
    return GreedyWalk(devices, value, np.array([view.start_objective] + view.moves[before:]),
                      episode.devices, tuple(ends), not episode.moved_any)
