"""tf-placeto train: a policy that place uses, bad input said before any runtime opens,
an --out folder of the user's refused."""

import json
import os
import pathlib

import pytest



def test_train_writes_a_policy_that_place_uses(mlp_model, tmp_path, cli_here):
    out, cache = tmp_path / "policy", str(tmp_path / "cache")
    result = cli_here("train", "--graphs", mlp_model, "--counts", "2", "--out", str(out),
                     "--steps", "2", "--episodes", "2", "--start", "single", "fast",
                     "--imitate", "3", "--keep-imitating", "2",
                     "--imitate-exact", "1", "--imitate-climb", "1", "--link", "25:7600", "k80",
                     "--real-steps", "1", "--cache", cache,
                     "--embedding", "8", "--rounds", "2")      # each trace of a big one: seconds
    assert result.returncode == 0, result.stderr
    assert "after 3 epochs of imitation" in result.stdout
    assert "imitation teaches the decisions of" in result.stderr
    assert "trained 3 iterations on 3 problems from 2 starts each (single, fast)" \
        in result.stdout
    assert "1 iterations measured for real" in result.stdout
    assert (out / "policy" / "saved_model.pb").is_file()
    assert (out / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = json.loads((out / "training.json").read_text())
    assert len(log["iterations"]) == 3 and len(log["imitation"]) == 3
    assert log["config"]["keep_imitating"] == 2
    assert (log["config"]["embedding"], log["config"]["rounds"]) == (8, 2)
    assert f"its path from the step change weighs {log['step_change_weight']:.3f} now\n" \
        in result.stdout
    assert sum(log["imitation"][0]["taught"].values()) == 3     # problems, by whose decision
    real = log["iterations"][-1]
    assert real["problem"] == 2 and all(s > 0 for s in real["real_start_s"] + real["real_end_s"])
    assert real["link"] == "runtime" and real["devices"] == 2 and real["graph"] == mlp_model
    assert {row["start"] for row in log["iterations"]} <= {"single", "fast"}
    assert {row["link"] for row in log["iterations"][:2]} <= {"25:7600", "k80"}
    assert "by setting (imitated: iterations followed by imitation batches):" in result.stdout
    logged = [json.loads(line) for path in pathlib.Path(cache).rglob("observations.jsonl")
              for line in path.read_text().splitlines()]
    assert sum(o["origin"] == "train" for o in logged) >= 1
    placed = cli_here("place", mlp_model, "--cluster", "local:2", "--method", "placeto",
                     "--policy", str(out), "--start", "random", "--simulate", "--cache", cache,
                     "--json")
    assert placed.returncode == 0, placed.stderr
    summary = json.loads(placed.stdout)
    assert summary["predicted_after_s"] > 0 and summary["start"] == "random"
    assert 0 < summary["best_on_walk_step_s"] <= summary["policy_step_s"]


@pytest.mark.parametrize("args, message", [
    (["--counts", "1"], "--counts 1: a placement needs at least 2 devices"),
    (["--counts", "2", "--members", "5-2"], "--members '5-2': write A-B"),
    (["--counts", "2", "--steps", "0"], "--steps 0 trains nothing"),
    (["--counts", "2", "--imitate-exact", "5"], "--imitate-exact chooses what imitation"),
    (["--counts", "2", "--imitate-climb", "5"], "--imitate-climb chooses what imitation"),
    (["--counts", "2", "--keep-imitating-where", "one-device"],
     "--keep-imitating-where chooses when --keep-imitating imitates"),
    (["--counts", "2", "--link", "k80", "fast"], "link 'fast'"),
    (["--counts", "2", "--warm-start", "no/such/run"], "--warm-start no/such/run: not a training"),
    (["--counts", "2", "--graphs", "examples:mlp", "corpus:nonesuch"],
     "no corpus family or model nonesuch (left out: none; families: branches, control_flow"),
])
def test_train_bad_input_gives_one_line(args, message, tmp_path, cli_here, monkeypatch):
    """Said before any runtime opens (a cluster would start and warm its links first)."""
    from tf_placeto import settings

    def no_runtime(*_, **__):
        raise AssertionError("a runtime opened before the input was checked")

    monkeypatch.setattr(settings, "open_runtime", no_runtime)
    result = cli_here("train", "--graphs", "examples:mlp", "--out", str(tmp_path / "p"),
                      *args)
    code, error = result.returncode, result.stderr
    assert code == 2 and message in error, error
    assert len(error.splitlines()) == 1


def test_train_refuses_an_out_folder_that_holds_something_else(tmp_path, cli_here):
    """In one line, before any work: training would write its files among the user's."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    result = cli_here("train", "--graphs", "examples:mlp", "--counts", "2", "--out",
                      str(mine))
    code, error = result.returncode, result.stderr
    assert code == 2 and "not a training folder" in error and len(error.splitlines()) == 1
    assert os.listdir(mine) == ["notes.txt"] and (mine / "notes.txt").read_text() == "mine"


def test_several_warm_starts_make_their_mean_the_policy(tmp_path, cli_here):
    """--steps 0 --warm-start A B: a model soup, said, saved and exported."""
    corpus = ["--graphs", "corpus:lookup", "--settings", "k80", "--counts", "2",
              "--embedding", "4", "--rounds", "1", "--episodes", "1"]
    runs = []
    for seed in ("1", "2"):
        runs.append(str(tmp_path / f"run{seed}"))
        trained = cli_here("train", *corpus, "--steps", "1", "--seed", seed, "--out", runs[-1])
        assert trained.returncode == 0, trained.stderr
    soup = tmp_path / "soup"
    result = cli_here("train", *corpus, "--steps", "0", "--warm-start", *runs,
                      "--out", str(soup))
    assert result.returncode == 0, result.stderr
    assert f"the mean of the weights of 2 networks ({', '.join(runs)})" in result.stdout
    assert (soup / "policy" / "saved_model.pb").is_file()
    assert json.loads((soup / "training.json").read_text())["config"]["warm_start"] == runs

