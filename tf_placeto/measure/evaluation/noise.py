"""Step times that know their noise: medians with intervals, and interleaved runs.

On a shared machine one placement timed twice can differ by 2x (the 16 placements of issue
19's report, each measured twice in two sessions), and the machine drifts while it is being
measured. So placements are timed in rounds (A B C, B C A, C A B, ...) that expose
every placement to the same drift, and each placement is judged by the ratio of its time to
the baseline's *in the same round*. Intervals are distribution-free: the order statistics that
bracket a median with the asked confidence (a sign test), so no normality is assumed.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Optional, Sequence, Union

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
# --repeats auto: rounds until every ratio's interval is this narrow (half-width over median),
# or the time budget ends.
TARGET_HALF_WIDTH = 0.05
MAX_ROUNDS = 60


@dataclasses.dataclass(frozen=True)
class Interval:
    """A median and the interval that holds the true median with `confidence`."""

    low: float
    median: float
    high: float
    confidence: float = CONFIDENCE

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    @property
    def relative_half_width(self) -> float:
        return (self.high - self.low) / 2 / self.median if self.median > 0 else math.inf

    def to_json(self) -> dict:
        return {"low": self.low, "median": self.median, "high": self.high,
                "confidence": self.confidence}


def median_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """The sample median and the order statistics (x_(k), x_(n+1-k)) around it, with k the
    largest rank whose two-sided binomial tail leaves at least `confidence`; with too few
    samples for that confidence (fewer than rounds_for(confidence)), the whole range and the
    lower confidence it really has."""
    values = np.sort(np.asarray(samples, dtype=float))
    n = len(values)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, confidence)
    # P(x_(k) <= median <= x_(n+1-k)) = 1 - 2 * P(Binomial(n, 1/2) <= k - 1)
    k = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5))
    while k >= 1 and 1 - 2 * stats.binom.cdf(k - 1, n, 0.5) < confidence:
        k -= 1
    if k < 1:
        k, confidence = 1, min(confidence, 1 - 2 * 0.5 ** n)
    return Interval(float(values[k - 1]), float(np.median(values)), float(values[n - k]),
                    confidence)


def rounds_for(confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose median interval (the whole range) has `confidence`: 6 for
    95%. Fewer rounds cannot tell two placements apart at that confidence, however large the
    gap (three rounds all faster happen by chance one time in eight)."""
    return math.ceil(1 - math.log2(1 - confidence))


MIN_ROUNDS = rounds_for(CONFIDENCE)     # before an interval can be narrow at its confidence


def ratio_interval(times: Sequence[float], baseline: Sequence[float],
                   confidence: float = CONFIDENCE) -> Interval:
    """The median of round-by-round ratios times / baseline, with its interval."""
    pairs = [(t, b) for t, b in zip(times, baseline) if b > 0]
    return median_interval([t / b for t, b in pairs], confidence)


@dataclasses.dataclass
class Series:
    """One placement's interleaved step times (seconds): times_s[r] is round r's, so two
    series pair up round by round (a series that failed stops early)."""

    times_s: list = dataclasses.field(default_factory=list)
    error: Optional[BaseException] = None      # what stopped it, if anything did

    @property
    def interval(self) -> Interval:
        return median_interval(self.times_s)


def interleave(steps: Sequence[Callable[[], float]],
               repeats: Union[int, str] = "auto", budget_s: float = 60.0,
               on_round: Callable[[int, list], None] = lambda rounds, series: None,
               max_rounds: int = MAX_ROUNDS, earlier: Optional[Sequence[Sequence[float]]] = None,
               earlier_s: float = 0.0, min_rounds: int = 2) -> list:
    """Time every step callable once per round, in an order rotated each round, and return
    one Series per callable.

    repeats: the number of rounds, or "auto": at least MIN_ROUNDS, then until every ratio
    to the first callable (a lone callable: its median) is known to TARGET_HALF_WIDTH, or
    `budget_s` seconds have passed (and at least `min_rounds` have run), or `max_rounds`.
    Each callable runs one step and returns its seconds. on_round(rounds, series) follows
    every round.
    `earlier`: each callable's times from rounds already timed, taking `earlier_s` seconds
    (a measurement resumed); they count as rounds, and as time spent, like the new ones.
    A callable that raises drops out; its Series keeps the exception as `error`.
    """
    series = [Series(list(times)) for times in earlier] if earlier else [Series() for _ in steps]
    if not steps:
        return series
    start = time.perf_counter() - earlier_s
    rounds = min(len(s.times_s) for s in series)

    def done() -> bool:
        if repeats != "auto":
            return rounds >= int(repeats)
        return rounds >= max_rounds or (rounds >= max(2, min_rounds)
                                        and time.perf_counter() - start >= budget_s) \
            or (rounds >= max(MIN_ROUNDS, min_rounds) and _narrow(series))

    while not done():
        order = list(range(len(steps)))
        order = order[rounds % len(order):] + order[:rounds % len(order)]
        for index in order:
            if series[index].error is None:
                try:
                    series[index].times_s.append(float(steps[index]()))
                except Exception as exc:  # the step's own error: its series ends with it
                    series[index].error = exc
        rounds += 1
        on_round(rounds, series)
    return series


def _narrow(series: list) -> bool:
    """Known well enough: every ratio to the first placement still running (what a
    comparison decides on; shared drift cancels in it), or a lone placement's median."""
    alive = [s for s in series if s.error is None]
    if len(alive) < 2:
        return not alive or alive[0].interval.relative_half_width <= TARGET_HALF_WIDTH
    base = alive[0].times_s
    return all(ratio_interval(s.times_s, base).relative_half_width <= TARGET_HALF_WIDTH
               for s in alive[1:])
