"""tf_placeto.train() from Python: the recipe `tf-placeto train` runs, on the smallest
problem the training tests use."""

import logging
import os

import pytest

import tf_placeto as tp


def test_train_from_python_exports_a_policy_and_says_what_it_did(mlp_model, small_profiles,
                                                                   tmp_path, caplog):
    out = str(tmp_path / "run")
    plan = tp.TrainingPlan(graphs=[mlp_model], counts=[2], out=out, max_groups=6, steps=1,
                           episodes=2)
    with caplog.at_level(logging.INFO, logger="tf_placeto"):
        result = tp.train(plan, tp.Target(devices="2", cache=small_profiles))
    assert os.path.isfile(os.path.join(result.policy, "saved_model.pb"))
    assert (result.problems, result.starts) == (1, ["random"])
    [row] = result.log["iterations"]
    assert row["graph"] == mlp_model and row["devices"] == 2 and row["link"] == "measured"
    assert result.by_setting()["iterations"].tolist() == [1]
    assert f"writing the checkpoints, the log and the policy to {out}" in caplog.messages


def test_a_plan_that_cannot_train_is_refused_before_any_work(tmp_path):
    plan = tp.TrainingPlan(graphs=["examples:mlp"], counts=[1], out=str(tmp_path / "run"))
    with pytest.raises(tp.InputError, match="--counts 1: a placement needs at least 2"):
        tp.train(plan)
    assert not os.path.exists(tmp_path / "run")
