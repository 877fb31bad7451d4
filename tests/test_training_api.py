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


def test_the_corpus_trains_with_no_runtime_and_leaves_a_family_out(tmp_path, monkeypatch):
    """corpus:FAMILY graphs are read from the compact profiles: nothing is profiled, so no
    runtime opens (no cluster started, no cores claimed)."""
    def no_runtime(self):
        raise AssertionError("a runtime was opened")
    monkeypatch.setattr(tp.Target, "open", no_runtime)
    plan = tp.TrainingPlan(graphs=["corpus:control_flow", "corpus:lookup"], counts=[2],
                           settings=["k80", "cluster"], out=str(tmp_path / "run"), steps=2,
                           episodes=1, embedding=4, rounds=1)
    result = tp.train(plan)
    assert result.problems == 6                 # control_flow, its long one, lookup x 2 settings
    assert os.path.isfile(os.path.join(result.policy, "saved_model.pb"))
    assert {(row["graph"], row["link"]) for row in result.log["iterations"]} <= {
        (graph, link) for graph in ("control_flow", "control_flow_long", "lookup")
        for link in ("k80", "cluster")}
    refused = tp.TrainingPlan(graphs=["corpus:lookup"], counts=[2], without=["lookup"],
                              out=str(tmp_path / "other"))
    with pytest.raises(tp.InputError, match="no corpus family or model lookup \\(left out: "
                                            "lookup"):
        tp.train(refused)
    with pytest.raises(tp.InputError, match="unknown setting 'tpu'"):
        tp.train(tp.TrainingPlan(graphs=["corpus"], counts=[2], settings=["tpu"],
                                 out=str(tmp_path / "third")))


def test_imitation_keeps_the_warm_starts_own_decisions_where_they_are_close(tmp_path):
    """imitate_own: a problem's lesson is the warm-started network's own greedy decision
    wherever that simulates within the factor of the best known decision, and the best known
    elsewhere; its greedy decision is where the exported policy's greedy episode ends. With
    imitate_greedy, the simulator's greedy pass is the lesson where it ends faster, and with
    imitate_veto the network's own moves under the simulator's veto likewise; with dagger,
    those lessons are also taught along the network's own walks, and with dagger passes > 1
    every lesson is, over walks of up to that many passes."""
    from tf_placeto.placers.corpus_problems import corpus_problems, load_profiles
    from tf_placeto.policy.episode import SimulatedGreedy, SimulatorVeto, greedy_walk
    from tf_placeto.policy.inference import greedy_placement, loaded_policy
    from tf_placeto.policy.objective import Objective
    from tf_placeto.policy.observation import GraphView
    from tf_placeto.policy.starts import best_known

    corpus = dict(graphs=["corpus:lookup"], counts=[2, 4], settings=["k80", "cluster"],
                  embedding=4, rounds=1, episodes=1)
    first = tp.train(tp.TrainingPlan(out=str(tmp_path / "first"), steps=2, **corpus))
    warm = os.path.dirname(first.policy)
    posed = [p.problem for p in corpus_problems(load_profiles(families=["lookup"]),
                                                corpus["settings"], corpus["counts"])]
    own_us = [greedy_placement(problem, warm).end_value for problem in posed]
    known_us = [Objective(problem)(best_known(problem)[1])[0] for problem in posed]
    for within, out in ((1.0, "strict"), (1e9, "loose")):
        result = tp.train(tp.TrainingPlan(out=str(tmp_path / out), steps=0, imitate=1,
                                          imitate_own=within, warm_start=warm, **corpus))
        taught = result.log["imitation"][0]["taught"]
        close = sum(own <= within * known for own, known in zip(own_us, known_us))
        assert taught.get("own", 0) == close and sum(taught.values()) == len(posed)
    assert taught == {"own": len(posed)}
    # a second teacher: the simulator's greedy pass, where it ends faster than the network
    greedy_us = [greedy_walk(GraphView(problem), SimulatedGreedy()).end_value
                 for problem in posed]
    result = tp.train(tp.TrainingPlan(out=str(tmp_path / "two"), steps=0, imitate=1,
                                      imitate_own=1e9, imitate_greedy=True, warm_start=warm,
                                      dagger=True, **corpus))
    faster = sum(greedy < own for greedy, own in zip(greedy_us, own_us))
    # with dagger, the rule's lessons are also walked where the network leads (2 starts)
    assert result.log["imitation"][0]["own_walk_moves"] == sum(
        2 * problem.n_groups for problem, greedy, own in zip(posed, greedy_us, own_us)
        if greedy < own)
    assert faster > 0                   # the lookup model's K80 problems: the rule is faster
    assert result.log["imitation"][0]["taught"] == {
        name: count for name, count in (("simulated_greedy", faster),
                                        ("own", len(posed) - faster)) if count}
    # a third teacher: the network's own moves under the simulator's veto (no margin)
    vetoed_us = [greedy_walk(GraphView(problem), SimulatorVeto(loaded_policy(warm), 0.0))
                 .end_value for problem in posed]
    result = tp.train(tp.TrainingPlan(out=str(tmp_path / "veto"), steps=0, imitate=1,
                                      imitate_own=1e9, imitate_veto=0.0, warm_start=warm,
                                      **corpus))
    vetoed = sum(veto < own for veto, own in zip(vetoed_us, own_us))
    assert vetoed > 0
    assert result.log["imitation"][0]["taught"] == {
        name: count for name, count in (("own_vetoed", vetoed),
                                        ("own", len(posed) - vetoed)) if count}
    # walking again (dagger=2): the network's own lessons (every one here, as in the loose
    # run) are walked too
    again = tp.train(tp.TrainingPlan(out=str(tmp_path / "again"), steps=0, imitate=1,
                                     imitate_own=1e9, warm_start=warm, dagger=2, **corpus))
    assert again.log["imitation"][0]["taught"] == {"own": len(posed)}
    walked = sum(2 * problem.n_groups for problem in posed)
    assert walked <= again.log["imitation"][0]["own_walk_moves"] <= 2 * walked
    for bad, message in ((dict(imitate_own=0.9, warm_start=warm), "at least 1"),
                         (dict(dagger=-1), "--dagger PASSES: at least 1"),
                         (dict(imitate_own=1.1), "give --warm-start"),
                         (dict(imitate_greedy=True, warm_start=warm), "give --imitate-own"),
                         (dict(imitate_veto=0.5, warm_start=warm), "give --imitate-own"),
                         (dict(imitate_own=1.1, imitate_veto=-1.0, warm_start=warm),
                          "a margin, at least 0"),
                         (dict(imitate_own=1.1, warm_start=warm, imitate=0, steps=1),
                          "give --imitate or --keep-imitating"),
                         (dict(dagger=True, imitate=0, steps=1), "give --imitate E")):
        plan = tp.TrainingPlan(out=str(tmp_path / "refused"), **{"imitate": 1, **corpus, **bad})
        with pytest.raises(tp.InputError, match=message):
            tp.train(plan)


def test_several_warm_starts_average_into_the_policy_of_a_run_that_trains_nothing(tmp_path):
    """--steps 0 with several --warm-start DIRs: the mean of their weights is saved (it can be
    resumed, fine-tuned and taken as a warm start) and exported."""
    import numpy as np

    from tf_placeto.placers.corpus_problems import corpus_problems, load_profiles
    from tf_placeto.policy.inference import greedy_placement

    corpus = dict(graphs=["corpus:lookup"], counts=[2], settings=["k80"], embedding=4,
                  rounds=1, episodes=1)
    runs = [os.path.dirname(tp.train(tp.TrainingPlan(out=str(tmp_path / f"run{seed}"),
                                                     steps=1, seed=seed, **corpus)).policy)
            for seed in (1, 2)]
    soup = tp.train(tp.TrainingPlan(out=str(tmp_path / "soup"), steps=0, warm_start=runs,
                                    **corpus))
    assert soup.log["imitation"] == [] and soup.log["iterations"] == []
    saved = sorted(os.listdir(os.path.join(tmp_path, "soup", "checkpoints")))
    assert saved
    tp.train(tp.TrainingPlan(out=str(tmp_path / "soup"), steps=0, warm_start=runs, **corpus))
    assert sorted(os.listdir(os.path.join(tmp_path, "soup", "checkpoints"))) == saved
    [posed] = corpus_problems(load_profiles(names=["lookup"]), ["k80"], [2])
    walk = greedy_placement(posed.problem, os.path.dirname(soup.policy))
    assert np.isfinite(walk.end_value)
    with pytest.raises(tp.InputError, match="give one --warm-start DIR"):
        tp.train(tp.TrainingPlan(out=str(tmp_path / "refused"), steps=0, imitate=1,
                                 imitate_own=1.1, warm_start=runs, **corpus))
    with pytest.raises(tp.InputError, match="--steps 0 trains nothing"):
        tp.train(tp.TrainingPlan(out=str(tmp_path / "alone"), steps=0, warm_start=runs[:1],
                                 **corpus))


def test_one_warm_start_with_a_step_change_weight_is_the_policy_of_a_run_that_trains_nothing(
        tmp_path):
    """--steps 0 with one --warm-start DIR and --step-change-weight W: the network of DIR
    with its path from the step change weighed W, saved and exported; without W a warm start
    keeps its own weight."""
    import tensorflow as tf

    corpus = dict(graphs=["corpus:lookup"], counts=[2], settings=["k80"], embedding=4,
                  rounds=1, episodes=1)

    def path_weight(folder):
        reader = tf.train.load_checkpoint(os.path.join(folder, "checkpoints"))
        [key] = [k for k in reader.get_variable_to_shape_map()
                 if "step_change" in k and "OPTIMIZER_SLOT" not in k]
        return float(reader.get_tensor(key))

    run = os.path.dirname(tp.train(tp.TrainingPlan(out=str(tmp_path / "run"), steps=1,
                                                   **corpus)).policy)
    given = tp.train(tp.TrainingPlan(out=str(tmp_path / "given"), steps=0, warm_start=[run],
                                     step_change_weight=2.0, **corpus))
    assert given.log["iterations"] == [] and os.path.isfile(
        os.path.join(given.policy, "saved_model.pb"))
    assert path_weight(os.path.dirname(given.policy)) == 2.0
    again = tp.train(tp.TrainingPlan(out=str(tmp_path / "again"), steps=0,
                                     warm_start=[os.path.dirname(given.policy), run],
                                     **corpus))
    assert path_weight(os.path.dirname(again.policy)) == pytest.approx(
        (2.0 + path_weight(run)) / 2)
