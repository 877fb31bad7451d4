"""A cost graph (Tarnawski et al.'s JSON format) as the SOURCE of inspect, place, show and
compare: computed from the file, nothing run."""

import json

import pytest

from tests.helpers import FORK_INSTANCE


@pytest.fixture
def instance(tmp_path):
    path = tmp_path / "fork.json"
    path.write_text(json.dumps(FORK_INSTANCE))
    return str(path)


def test_inspect_says_what_the_file_holds(instance, cli_here):
    result = cli_here("inspect", instance, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["nodes"], summary["edges"], summary["accelerators"], summary["cpus"]) == \
        (5, 5, 2, 1)
    assert summary["unsupported_nodes"] == 1 and summary["accelerator_time"] == 13


def test_place_writes_a_split_that_show_scores_alike(instance, tmp_path, cli_here):
    out = tmp_path / "split.json"
    placed = cli_here("place", instance, "--method", "dp", "--objective", "throughput",
                      "--out", str(out), "--json")
    assert placed.returncode == 0, placed.stderr
    summary = json.loads(placed.stdout)
    assert summary["feasible"] and summary["simulated"] and summary["placement"] == str(out)
    split = json.loads(out.read_text())
    assert sorted(split) == list("abcde") and split["e"] == "/device:CPU:0"
    # {a, b} and {c, d}: 6 of compute each; a's and b's outputs cross (1 + 0.5, paid by both
    # sides) and d's goes to the CPU (2): 6 + 1.5 and 6 + 1.5 + 2
    assert summary["loads"] == {"/device:GPU:0": 7.5, "/device:GPU:1": 9.5,
                                "/device:CPU:0": 3.0} or summary["loads"] == {
        "/device:GPU:0": 9.5, "/device:GPU:1": 7.5, "/device:CPU:0": 3.0}
    assert summary["max_load"] == 9.5
    shown = cli_here("show", instance, "--placement", str(out), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["max_load"] == summary["max_load"]


def test_a_pipelines_split_without_a_latency_is_feasible_under_throughput(instance, tmp_path,
                                                                          cli_here):
    """a and d on one accelerator, b and c on the other: each call feeds the other, so the
    split has no latency (lip.py's model), but it keeps every rule and has a max-load."""
    split = tmp_path / "cycle.json"
    split.write_text(json.dumps({"a": "/device:GPU:0", "b": "/device:GPU:1",
                                 "c": "/device:GPU:1", "d": "/device:GPU:0",
                                 "e": "/device:CPU:0"}))
    shown = cli_here("show", instance, "--placement", str(split), "--json")
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(shown.stdout)
    assert summary["feasible"] and summary["reason"] is None and summary["latency"] is None
    assert "cycle" in summary["no_latency"] and summary["max_load"] > 0
    printed = cli_here("show", instance, "--placement", str(split)).stdout
    assert "no latency:" in printed and "infeasible" not in printed


def test_optimal_searches_for_the_time_it_is_given(instance, cli_here):
    placed = cli_here("place", instance, "--method", "optimal", "--objective", "throughput",
                      "--time-limit", "1.5", "--json")
    assert placed.returncode == 0, placed.stderr
    summary = json.loads(placed.stdout)
    assert summary["time_limit_s"] == 1.5 and summary["feasible"], summary


def test_the_dp_keeps_to_max_ideals(instance, cli_here):
    """--max-ideals bounds their DP as it bounds method dp on a TensorFlow graph: the fork has
    more than 3 ideals, so it is refused in one line."""
    refused = cli_here("place", instance, "--method", "dp", "--objective", "throughput",
                       "--max-ideals", "3")
    assert refused.returncode == 2 and "more than 3 ideals" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


def test_the_integer_program_is_never_worse_than_the_dp(instance, cli_here):
    result = cli_here("compare", instance, "--methods", "dp,optimal,one_accelerator",
                      "--objective", "throughput", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["method"]: row for row in json.loads(result.stdout)}
    assert rows["optimal"]["max_load"] <= rows["dp"]["max_load"] + 1e-9
    assert rows["optimal"]["vs_best"] == pytest.approx(1.0)
    assert rows["one_accelerator"]["max_load"] >= rows["dp"]["max_load"]


@pytest.mark.parametrize("args, message", [
    (["place", "--method", "dp"], "minimises the max-load: pass --objective throughput"),
    (["place", "--method", "greedy", "--objective", "throughput"],
     "minimises the latency: pass --objective latency"),
    (["place", "--devices", "2"], "names its own devices and memory"),
    (["place", "--method", "nonesuch"], "unknown method 'nonesuch' for a cost graph"),
    (["place", "--method", "heft", "--budget", "-1"], "--budget must be at least 0"),
    (["compare", "--experts", "missing"], "--experts missing: not a folder"),
    (["show"], "give the split with --placement"),
])
def test_what_a_cost_graph_cannot_take_is_refused_in_one_line(instance, args, message,
                                                              cli_here):
    result = cli_here(args[0], instance, *args[1:])
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_an_existing_file_is_replaced_only_with_overwrite(instance, tmp_path, cli_here):
    notes = tmp_path / "notes.json"
    notes.write_text("[1, 2]")
    args = ["place", instance, "--objective", "throughput", "--out", str(notes)]
    refused = cli_here(*args)
    assert refused.returncode == 2 and "exists" in refused.stderr
    refused = cli_here(*args, "--overwrite")       # not a placement: never replaced
    assert refused.returncode == 2 and notes.read_text() == "[1, 2]"


def test_under_latency_the_program_is_at_or_below_their_greedy(instance, cli_here):
    """Method auto under the latency objective (the default) is the latency program."""
    placed = cli_here("place", instance, "--json")
    assert placed.returncode == 0, placed.stderr
    summary = json.loads(placed.stdout)
    assert summary["method"] == "optimal" and summary["objective"] == "latency"
    compared = cli_here("compare", instance, "--methods", "greedy,optimal", "--json")
    rows = {row["method"]: row for row in json.loads(compared.stdout)}
    assert summary["latency"] == pytest.approx(rows["optimal"]["latency"])
    assert rows["optimal"]["latency"] <= rows["greedy"]["latency"] + 1e-9


@pytest.mark.parametrize("command", [["measure"], ["profile"],
                                     ["apply", "--placement", "p.json", "--out", "o"]])
def test_the_commands_that_run_a_graph_say_a_cost_graph_runs_nothing(instance, command,
                                                                      cli_here):
    result = cli_here(command[0], instance, *command[1:])
    assert result.returncode == 2 and "runs nothing: inspect, place, show and compare take it" \
        in result.stderr, result.stderr


def test_compare_scores_every_method_under_both_objectives(instance, cli_here):
    """Methods that minimise the other objective still give a split, scored under both."""
    result = cli_here("compare", instance, "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {row["method"] for row in rows} == {"dp", "optimal", "greedy", "one_accelerator",
                                               "local_search", "pipedream", "metis", "m_topo",
                                               "m_etf", "m_sct", "heft", "hill_climb"}
    assert all(row["latency"] > 0 and row["max_load"] > 0 for row in rows)
    assert min(row["vs_best"] for row in rows) == pytest.approx(1.0)


PROJECT_PLACERS = ["metis", "m_topo", "m_etf", "m_sct", "heft", "hill_climb", "placeto"]


@pytest.mark.parametrize("method", PROJECT_PLACERS[:-1])
def test_the_projects_placers_split_within_the_accelerators_memory(method, tmp_path,
                                                                   cli_here):
    """Each accelerator holds one node of 10 bytes: the other two supported nodes go to the
    CPU with e, as their accounting and the placer's simulator both require."""
    tight = tmp_path / "tight.json"
    tight.write_text(json.dumps({**FORK_INSTANCE, "maxSizePerFPGA": 10}))
    out = tmp_path / "split.json"
    placed = cli_here("place", str(tight), "--method", method, "--objective", "throughput",
                      "--out", str(out), "--json")
    assert placed.returncode == 0, placed.stderr
    summary = json.loads(placed.stdout)
    assert summary["feasible"] and summary["method"] == method, summary["reason"]
    split = json.loads(out.read_text())
    assert sorted(split) == list("abcde") and split["e"] == "/device:CPU:0"
    assert list(split.values()).count("/device:CPU:0") == 3
    shown = cli_here("show", str(tight), "--placement", str(out), "--json")
    assert json.loads(shown.stdout)["max_load"] == summary["max_load"]


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_compare_takes_every_project_placer_placeto_when_named(instance, objective, cli_here):
    result = cli_here("compare", instance, "--methods", ",".join(PROJECT_PLACERS),
                      "--objective", objective, "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["method"] for row in rows] == PROJECT_PLACERS
    assert all(row["reason"] == "" and row["max_load"] >= 6 for row in rows), rows


@pytest.fixture
def experts(tmp_path):
    """Their folder: the experts split the fork as the DP does; `wide`'s split uses more
    accelerators than its graph has."""
    folder = tmp_path / "human-experts"
    folder.mkdir()
    split = {"fpgas": [{"nodes": [0, 1]}, {"nodes": [2, 3]}], "cpus": [{"nodes": [4]}]}
    (folder / "fork_expert.json").write_text(json.dumps(split))
    wide = {**split, "fpgas": split["fpgas"] + [{"nodes": []}]}
    (folder / "wide_expert.json").write_text(json.dumps(wide))
    return str(folder)


def test_the_experts_split_is_a_row_of_the_graphs_that_have_one(instance, experts, tmp_path,
                                                                 cli_here):
    graphs = {}
    for name in ("wide", "alone"):
        graphs[name] = tmp_path / f"{name}.json"
        graphs[name].write_text(json.dumps(FORK_INSTANCE))
    result = cli_here("compare", instance, str(graphs["wide"]), str(graphs["alone"]),
                      "--methods", "dp", "--objective", "throughput", "--experts", experts,
                      "--json")
    assert result.returncode == 0, result.stderr
    rows = {(row["graph"], row["method"]): row for row in json.loads(result.stdout)}
    assert sorted(method for _, method in rows) == ["dp", "dp", "dp", "experts", "experts"]
    ours = rows[(instance, "experts")]
    assert (ours["max_load"], ours["latency"], ours["vs_best"], ours["reason"]) == \
        (9.5, 20, 1, "")
    theirs = rows[(str(graphs["wide"]), "experts")]
    assert theirs["max_load"] is None and "uses 3 accelerators" in theirs["reason"]
    assert (str(graphs["alone"]), "experts") not in rows


def test_experts_are_refused_on_a_tensorflow_graph(experts, cli_here):
    result = cli_here("compare", "examples:mlp", "--experts", experts)
    assert result.returncode == 2 and "--experts reads Tarnawski et al.'s experts' splits" \
        in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1
