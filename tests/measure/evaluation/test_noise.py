"""Intervals on medians and interleaved rounds, on synthetic noise whose truth is known."""

import numpy as np
import pytest

from tf_placeto.measure.evaluation.noise import (CONFIDENCE, TARGET_HALF_WIDTH, Interval,
                                                 interleave, median_interval, ratio_interval,
                                                 rounds_for)


def test_the_median_interval_contains_the_true_median_as_often_as_it_promises():
    rng = np.random.default_rng(0)
    true_median = 1.0                       # the median of lognormal(0, s) is exp(0)
    trials = 1000
    hits = sum(median_interval(rng.lognormal(0.0, 0.5, 15)).contains(true_median)
               for _ in range(trials))
    assert hits / trials >= 0.93            # 95% promised; order statistics are conservative


def test_the_interval_narrows_with_more_samples_and_brackets_the_median():
    rng = np.random.default_rng(1)
    few = median_interval(rng.lognormal(0.0, 0.3, 9))
    many = median_interval(rng.lognormal(0.0, 0.3, 99))
    assert few.low <= few.median <= few.high and many.low <= many.median <= many.high
    assert many.high - many.low < few.high - few.low


def test_too_few_samples_give_the_whole_range_and_say_how_sure_it_is():
    interval = median_interval([3.0, 1.0, 2.0])
    assert (interval.low, interval.median, interval.high) == (1.0, 2.0, 3.0)
    assert interval.confidence == 0.75          # 1 - 2 / 2**3: all three on one side
    assert rounds_for(CONFIDENCE) == 6
    assert median_interval(np.arange(6.0)).confidence == CONFIDENCE
    assert median_interval(np.arange(5.0)).confidence < CONFIDENCE


def test_a_time_budget_ends_the_rounds_only_after_the_least_asked_for():
    series = interleave([lambda: 0.001, lambda: 0.002], repeats="auto", budget_s=0.0,
                        min_rounds=6)
    assert [len(s.times_s) for s in series] == [6, 6]
    assert len(interleave([lambda: 0.001], repeats="auto", budget_s=0.0)[0].times_s) == 2


def test_a_ratio_is_taken_round_by_round_so_shared_drift_cancels():
    drift = np.linspace(1.0, 3.0, 12)                 # the machine slows down threefold
    baseline, faster = 0.010 * drift, 0.008 * drift   # 20% faster in every round
    ratio = ratio_interval(faster, baseline)
    assert ratio.median == pytest.approx(0.8) and ratio.high < 1.0
    # the plain medians' intervals overlap: without pairing, the gain is lost in the drift
    assert median_interval(faster).high > median_interval(baseline).low


def test_interleaving_rotates_the_order_and_stops_when_narrow():
    calls = []
    rng = np.random.default_rng(2)

    def step(label, seconds):
        def run():
            calls.append(label)
            return seconds * rng.lognormal(0.0, 0.01)
        return run

    series = interleave([step("A", 0.01), step("B", 0.02)], repeats="auto")
    rounds = len(series[0].times_s)
    assert 5 <= rounds < 60 and len(series[1].times_s) == rounds
    assert calls[:4] == ["A", "B", "B", "A"]           # round 2 starts with B
    assert series[1].interval.contains(0.02) or abs(series[1].interval.median - 0.02) < 1e-3
    assert ratio_interval(series[1].times_s, series[0].times_s).relative_half_width <= \
        TARGET_HALF_WIDTH                               # stopped because it was narrow


def test_a_failing_step_drops_out_with_its_reason_and_the_others_go_on():
    def broken():
        raise RuntimeError("worker 1 died")

    series = interleave([lambda: 0.01, broken], repeats=4)
    assert len(series[0].times_s) == 4 and series[1].times_s == []
    assert isinstance(series[1].error, RuntimeError) and "worker 1 died" in str(series[1].error)
    assert isinstance(series[0].interval, Interval)


def test_a_resumed_interleaving_keeps_the_earlier_rounds_and_runs_only_the_rest():
    calls, seen = [], []

    def step(label):
        def run():
            calls.append(label)
            return 0.5
        return run

    series = interleave([step("A"), step("B")], repeats=5, earlier=[[1.0, 2.0, 3.0]] * 2,
                        on_round=lambda rounds, s: seen.append(rounds))
    assert [s.times_s for s in series] == [[1.0, 2.0, 3.0, 0.5, 0.5]] * 2
    assert calls == ["B", "A", "A", "B"] and seen == [4, 5]    # the rotation goes on too
    assert interleave([step("A")], repeats=3, earlier=[[1.0, 2.0, 3.0]])[0].times_s == \
        [1.0, 2.0, 3.0] and len(calls) == 4                   # nothing left to time
