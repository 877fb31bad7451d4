"""The journal of a measurement in turns: what is appended comes back, a torn line does not,
and each measurement has its own."""

import os

from tf_placeto.measure.evaluation.journal import RoundJournal


def test_rounds_and_failures_come_back_and_a_torn_line_is_skipped(tmp_path):
    journal = RoundJournal(str(tmp_path), ["a", "b", "c"], {"warmup": 1})
    assert journal.restore() == ([], {}, 0.0)
    journal.record_round([0.1, 0.2, None], 0.5)
    journal.record_failure(2, "infeasible", "out of memory on /device:CPU:1")
    journal.record_round([0.3, 0.4, None], 1.25)
    with open(journal.path, "a") as torn:          # a run killed while writing a line
        torn.write('{"round": [0.5, 0.6')
    again = RoundJournal(str(tmp_path), ["a", "b", "c"], {"warmup": 1})
    assert again.restore() == ([[0.1, 0.2, None], [0.3, 0.4, None]],
                               {2: ("infeasible", "out of memory on /device:CPU:1")}, 1.25)
    again.finish()
    assert not os.path.exists(journal.path) and journal.restore() == ([], {}, 0.0)


def test_other_placements_or_settings_are_another_measurement(tmp_path):
    paths = {RoundJournal(str(tmp_path), keys, settings).path
             for keys, settings in [(["a", "b"], {"warmup": 1}), (["b", "a"], {"warmup": 1}),
                                    (["a", "b"], {"warmup": 2}), (["a"], {"warmup": 1})]}
    assert len(paths) == 4
