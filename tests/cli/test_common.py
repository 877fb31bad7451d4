"""What the commands share: numbers checked where they are parsed, the SOURCE arguments."""

import pytest



# Refused by the parser itself (tf_placeto.cli's argparse types).
@pytest.mark.parametrize("args, message", [
    (["apply", "m"], "the following arguments are required: --placement"),
    (["measure", "m", "--timeout", "-1"], "--timeout: must be a finite number of seconds"),
    (["measure", "m", "--timeout", "inf"], "--timeout: must be a finite number of seconds"),
    (["measure", "m", "--timeout", "nan"], "--timeout: must be a finite number of seconds"),
    (["measure", "m", "--time-budget", "0"], "--time-budget: must be a finite number"),
    (["measure", "m", "--timeout", "1e300"], "--timeout: must be a finite number of seconds "
                                             "above 0 and at most 2592000 (30 days), not 1e300"),
    (["measure", "m", "--time-budget", "1e9"], "--time-budget: must be a finite number"),
    (["measure", "m", "--warmup", "-1"], "--warmup: must be at least 0, not -1"),
    (["measure", "m", "--sessions", "0"], "--sessions: must be at least 1, not 0"),
    (["measure", "m", "--repeats", "2.5"], "--repeats"),
    (["profile", "m", "--runs", "0"], "--runs: must be at least 1, not 0"),
    (["profile", "m", "--calibrate", "-3"], "--calibrate: must be at least 0, not -3"),
    (["place", "m", "--max-groups", "0"], "--max-groups: must be at least 1, not 0"),
    (["inspect", "m", "--max-groups", "0"], "--max-groups: must be at least 1, not 0"),
    (["place", "m", "--seed", "-1"], "--seed: must be at least 0, not -1"),
    (["compare", "m", "--counts", "0", "--simulate"], "--counts: must be at least 1, not 0"),
    (["compare", "m", "--repeats", "0"], "--repeats: must be at least 1, not 0"),
    (["compare", "m", "--measure-best", "0"], "--measure-best: must be at least 1, not 0"),
    (["train", "--graphs", "m", "--counts", "2", "--out", "o", "--episodes", "0"],
     "--episodes: must be at least 1, not 0"),
    (["train", "--graphs", "m", "--counts", "2", "--out", "o", "--steps", "many"],
     "--steps: give a whole number, not 'many'"),
    (["compare", "m", "--simulate", "--counts", "2", "100000"],
     "--counts: must be at most 256 (devices like the profiled ones"),
    (["measure", "m", "--stream", "100000"],
     "--stream: must be at most 64 (each step in flight is a thread"),
])
def test_bad_numbers_are_refused_where_parsed_in_one_line(args, message, cli_here):
    result = cli_here(*args)
    code, error = result.returncode, result.stderr
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1 and error.startswith("tf-placeto")


@pytest.mark.parametrize("command", ["inspect", "apply", "profile", "measure", "place", "show"])
def test_every_command_taking_a_source_takes_a_tag_set(command, cli_here):
    assert "--tag-set TAGS" in cli_here(command, "--help").stdout
