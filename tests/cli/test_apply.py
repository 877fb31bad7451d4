"""tf-placeto apply: the placed copy is written."""

import json
import os



def _round_robin_file(inspected, path):
    path.write_text(json.dumps({op: f"/device:CPU:{g['id'] % 2}"
                                for g in inspected["groups"] for op in g["ops"]}))
    return str(path)


def test_apply_writes_the_placed_model(mlp_model, inspected, tmp_path, cli_here):
    placement = _round_robin_file(inspected, tmp_path / "p.json")
    out = str(tmp_path / "out")
    result = cli_here("apply", mlp_model, "--placement", placement, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "/device:CPU:1" in result.stdout
    assert os.path.isfile(os.path.join(out, "saved_model.pb"))
