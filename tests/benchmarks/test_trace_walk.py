"""measure/trace_walk.py: the policy's greedy walk, pass by pass, its moves counted."""

import pytest

from measure import trace_walk


@pytest.fixture(scope="module")
def lookup():
    from tf_placeto.placers.corpus_problems import named_problems

    [posed] = named_problems(["lookup:k80:4"])
    return posed.problem


def test_the_trace_is_the_walk_place_walks(lookup):
    from tf_placeto.policy import inference
    from tf_placeto.policy.starts import start_placement

    policy = inference.loaded_policy(inference.pretrained_policy())
    walk, traces = trace_walk.trace(lookup, policy, passes=3, seed=1)
    alone = inference.greedy_placement(lookup, inference.pretrained_policy(),
                                       start_placement(lookup, 1), passes=3)
    assert walk.pass_values == alone.pass_values and len(traces) == walk.passes
    # each pass's moves: every group it put elsewhere than it found it
    assert traces[0].moved > 0
    for moves in traces:
        assert 0 <= moves.toward_parents <= moves.against_simulator <= moves.moved
        assert moves.moved + moves.stayed_against <= lookup.n_groups
    assert walk.settled == (traces[-1].moved == 0)      # a pass that moves none ends it


def test_the_simulators_own_rule_never_moves_against_it(lookup):
    from tf_placeto.policy.episode import SimulatedGreedy

    walk, traces = trace_walk.trace(lookup, SimulatedGreedy(), passes=2)
    assert sum(moves.moved for moves in traces) > 0
    assert all(moves.against_simulator == 0 for moves in traces)
    assert all(moves.stayed_against == 0 for moves in traces)   # it moves where it pays


def test_each_pass_is_printed_with_where_it_ended(capsys):
    assert trace_walk.main(["lookup:k80:4", "--passes", "2", "--then-greedy", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("lookup:k80:4 (") and "from random start 0:" in lines[0]
    assert lines[1].startswith("  pass 1: ends ") and "against the simulator" in lines[1]
    assert "where the simulator found another device faster" in lines[1]
    assert lines[-1].startswith("  then the simulator's greedy rule: ")
