"""tf-placeto profile: the cost model stored and found again, the calibration in words."""

import json



def test_profile_stores_a_cost_model_and_finds_it_again(mlp_model, tmp_path, cli_here):
    cache = str(tmp_path / "cache")
    first = cli_here("profile", mlp_model, "--devices", "2", "--runs", "2", "--cache", cache,
                    "--json")
    assert first.returncode == 0, first.stderr
    profiled = json.loads(first.stdout)
    assert not profiled["cached"] and profiled["traced_ops"] > 0
    assert all(v >= 2.0 for v in profiled["remote_input_slowdowns"].values())
    assert [(l["src"], l["dst"]) for l in profiled["links"]] == [
        ("/device:CPU:0", "/device:CPU:1"), ("/device:CPU:1", "/device:CPU:0")]
    again = cli_here("profile", mlp_model, "--devices", "2", "--cache", cache)
    assert again.returncode == 0 and "found in the cache" in again.stdout
    assert "found a profile in the cache" in again.stderr


def test_the_calibration_report_gives_single_steps_and_streams_their_own_figures():
    """A profile whose log holds streams beside single steps prints each kind's held-out
    figures on a line of its own (fitting.held_out ranks them apart)."""
    from tf_placeto import api
    from tf_placeto.measure.costs.calibration import Calibration

    def figures(spearman, error):
        return {"spearman": spearman, "median_error": error}

    quality = {"calibrated": figures(0.9, 0.05), "uncalibrated": figures(0.5, 0.3),
               "runs": 40, "folds": 5, "streams": {"calibrated": figures(0.8, 0.09),
                                                   "uncalibrated": figures(0.4, 0.25),
                                                   "runs": 12}}
    lines = api.calibration_report(Calibration(observations=40, quality=quality)).splitlines()
    assert lines[1].startswith("on single steps it was not fitted on (5-fold): Spearman 0.90")
    assert lines[2].startswith("on streams it was not fitted on (5-fold): Spearman 0.80, "
                               "median error 9%")
    alone = {key: value for key, value in quality.items() if key != "streams"}
    assert api.calibration_report(Calibration(observations=40, quality=alone)).splitlines()[
        1].startswith("on runs it was not fitted on")
