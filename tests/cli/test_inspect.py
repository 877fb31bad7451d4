"""tf-placeto inspect: every op in exactly one group, the summary, the MetaGraph chosen."""

import json



def test_inspect_json_lists_every_op_in_exactly_one_group(inspected):
    ops = [op for group in inspected["groups"] for op in group["ops"]]
    assert len(ops) == len(set(ops)) == inspected["num_ops"]
    assert inspected["num_groups"] == len(inspected["groups"])
    assert [g["id"] for g in inspected["groups"]] == list(range(inspected["num_groups"]))
    assert inspected["num_colocation_groups"] == len(inspected["colocation_groups"]) > 0


def test_inspect_respects_max_groups(mlp_model, cli_here):
    result = cli_here("inspect", mlp_model, "--json", "--max-groups", "3")
    assert json.loads(result.stdout)["num_groups"] <= 3


def test_inspect_prints_a_readable_summary(mlp_model, cli_here):
    result = cli_here("inspect", mlp_model)
    assert result.returncode == 0 and result.stderr == ""
    assert "ops:" in result.stdout and "colocation groups:" in result.stdout
    assert "first op" in result.stdout


def test_a_tag_set_chooses_the_metagraph(two_tag_sets_model, cli_here):
    def ops(*tag_set):
        result = cli_here("inspect", two_tag_sets_model, *tag_set, "--json")
        assert result.returncode == 0, result.stderr
        return {op for group in json.loads(result.stdout)["groups"] for op in group["ops"]}

    assert "z" in ops() and "z" not in ops("--tag-set", "train,gpu")
    result = cli_here("inspect", two_tag_sets_model, "--tag-set", "eval")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"tf-placeto: error: {two_tag_sets_model}: no MetaGraph with the tag set 'eval' "
        "(tag sets: train,gpu; serve); choose one with --tag-set"]
