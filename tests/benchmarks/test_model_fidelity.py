"""measure/model_fidelity.py: the exact placer's model against the simulator, decision by
decision."""

import pandas as pd

from measure import model_fidelity


def test_a_model_that_is_the_simulator_is_faithful():
    table = pd.DataFrame({"model_us": [3.0, 1.0, 2.0], "simulated_us": [3.0, 1.0, 2.0]})
    assert model_fidelity.fidelity(table) == {"rank_correlation": 1.0, "median_error": 0.0,
                                              "first_choice": 1.0}


def test_a_model_that_ranks_backwards_picks_the_slowest():
    table = pd.DataFrame({"model_us": [1.0, 2.0, 3.0], "simulated_us": [4.0, 2.0, 1.0]})
    judged = model_fidelity.fidelity(table)
    assert judged["rank_correlation"] == -1.0 and judged["first_choice"] == 4.0
    assert judged["median_error"] == 0.75     # errors 0.75, 0 and 2


def test_each_problem_is_scored_and_summed_up_by_setting(capsys):
    assert model_fidelity.main(["lookup:k80:2", "lookup:cluster:2", "--random", "1"]) == 0
    rows, summary = capsys.readouterr().out.split("by setting")
    assert [line.split()[:3] for line in rows.strip().splitlines()[1:]] == [
        ["lookup", "lookup", "k80"], ["lookup", "lookup", "cluster"]]
    assert [line.split()[0] for line in summary.strip().splitlines()[-2:]] == ["k80", "cluster"]


def test_the_decisions_are_the_fast_placers_and_the_random_ones():
    from tf_placeto.placers.common import fast_placers
    from tf_placeto.placers.corpus_problems import named_problems

    [posed] = named_problems(["lookup:k80:2"])
    table = model_fidelity.scored(posed.problem, random=2)
    assert list(table["decision"]) == [spec.name for spec in fast_placers()] + [
        "random 1", "random 2"]
    assert (table["model_us"] > 0).all() and (table["simulated_us"] > 0).all()


def test_the_audit_set_is_scored_in_place_of_the_families(capsys):
    from tf_placeto.examples import audit

    assert model_fidelity.main(["--audit", "--settings", "k80", "--counts", "2",
                                "--random", "0"]) == 0
    rows = capsys.readouterr().out.split("by setting")[0].strip().splitlines()[1:]
    assert sorted(line.split()[0] for line in rows) == sorted(audit.MODELS)
