"""JSON-lines logs: a record appended after a torn line is kept, and what cannot be read is
named once and dropped, so the log heals."""

import json
import logging

from tf_placeto.records import append_record, read_records


def test_a_record_after_a_torn_line_is_kept_and_garbage_is_skipped_and_removed(tmp_path, caplog):
    log_path = str(tmp_path / "results.jsonl")
    append_record(log_path, {"key": "a", "step_s": 1.0})
    with open(log_path, "a", encoding="utf-8") as log:
        log.write('{"key": "b", "ste')                     # a writer killed mid-line
    append_record(log_path, {"key": "c", "step_s": 3.0})
    with open(log_path, "a", encoding="utf-8") as log:
        log.write("\x00\x17garbage\n[1, 2]\n{\"key\": 4}\n")
    valid = lambda record: isinstance(record["key"], str)  # noqa: E731
    with caplog.at_level(logging.WARNING, logger="tf_placeto"):
        records = read_records(log_path, valid)
    assert [r["key"] for r in records] == ["a", "c"]
    assert len(caplog.records) == 1 and "skipped 4 unreadable lines" in caplog.text
    assert log_path in caplog.text
    with open(log_path, encoding="utf-8") as log:          # healed: the good records alone
        assert [json.loads(line)["key"] for line in log] == ["a", "c"]
    caplog.clear()
    assert read_records(log_path, valid) == records and not caplog.records
