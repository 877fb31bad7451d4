"""The per-graph benchmark's summary over seeds (measure/bench_placeto.py)."""

import pandas as pd

from measure.bench_placeto import _over_seeds


def test_the_summary_over_seeds_takes_medians_and_counts_paired_wins():
    rows = pd.DataFrame({
        "graph": ["g"] * 3 + ["h"] * 2, "devices": [2] * 5, "seed": [0, 1, 2, 0, 1],
        "trained_random_ms": [10.0, 12.0, 9.0, 5.0, 5.0],
        "trained_random_vs_algorithm": [1.0, 1.2, 0.9, 0.5, 0.5],
        "placements_to_5pct_random": [100, 300, 200, 10, 50],
        "rnn_ms": [11.0, 11.0, 11.0, 5.0, 4.0], "rnn_vs_algorithm": [1.1, 1.1, 1.1, 0.5, 0.4],
        "rnn_placements_to_5pct": [150, 150, 150, 20, 20]})
    summary = _over_seeds(rows, ["random"]).set_index("graph")
    assert summary.loc["g", "seeds"] == 3 and summary.loc["h", "seeds"] == 2
    assert summary.loc["g", "trained_random_vs_algorithm"] == 1.0
    assert summary.loc["g", "placements_to_5pct_random"] == 200
    # paired by seed: g wins on seeds 0 and 2; h ties on seed 0 (at or below) and loses on 1
    assert summary.loc["g", "at_or_below_rnn_random"] == 2
    assert summary.loc["h", "at_or_below_rnn_random"] == 1
    assert summary.loc["g", "fewer_to_5pct_random"] == 1    # 100 < 150 only
    assert summary.loc["h", "fewer_to_5pct_random"] == 1
