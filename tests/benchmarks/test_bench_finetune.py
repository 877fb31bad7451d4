"""measure/bench_finetune.py: the shipped network fine-tuned on an unseen model against a new
network trained on it alone, in evaluations to the same step."""

import pandas as pd
import pytest

from measure import bench_finetune
from tf_placeto.errors import InputError


def test_fine_tuning_is_counted_against_the_step_scratch_reached(tmp_path, capsys):
    csv = tmp_path / "rows.csv"
    assert bench_finetune.main(["--problems", "lookup:k80:2", "--iterations", "1",
                                "--seeds", "2", "--first-seed", "3", "--csv", str(csv)]) == 0
    rows = pd.read_csv(csv)
    assert list(rows["seed"]) == [3, 4]
    row = rows.iloc[0]
    assert (row["graph"], row["setting"], row["devices"]) == ("lookup", "k80", 2)
    # the start, then one iteration of four episodes, each move of each a placement
    assert row["scratch_evaluations"] >= 5 and row["start"] > 0
    assert 1 <= row["scratch_to_5pct"] <= row["scratch_evaluations"]
    if pd.isna(row["fine_tuned_to_scratch_5pct"]):
        assert pd.isna(row["ratio"]) and row["fine_tuned"] > row["scratch"] * 1.05
    else:
        assert row["ratio"] == row["fine_tuned_to_scratch_5pct"] / row["scratch_to_5pct"]
    out = capsys.readouterr().out
    assert "fine-tuned within 5% of scratch's final step in at most a fifth" in out
    assert "median ratio over 2 seeds per problem" in out and "lookup " in out


def test_a_problem_is_named_by_model_setting_and_devices():
    with pytest.raises(InputError, match="a problem is MODEL:SETTING:DEVICES"):
        bench_finetune.main(["--problems", "lookup:k80"])
