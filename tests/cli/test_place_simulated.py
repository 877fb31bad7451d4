"""tf-placeto place --simulate on devices that are not there: --counts N devices like the
profiled ones, joined by --link (as compare takes them), and tf_placeto.place(n_devices, link)."""

import json

import pytest

from tf_placeto import methods
from tf_placeto.errors import InputError

K80 = {"latency_us": 25.0, "bytes_per_us": 7600.0, "copy_share": 0.0, "one_machine": True}


@pytest.fixture
def place_simulated(mlp_model, small_profiles, cli_here):
    """`place` of the mlp profiled on two logical CPUs (the session's cached profile), only
    simulated, its JSON summary."""
    def run(*args):
        result = cli_here("place", mlp_model, "--devices", "2", "--simulate", "--json",
                          "--max-groups", "8", "--cache", small_profiles, *args)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)
    return run


@pytest.mark.parametrize("method", methods.names())
def test_every_method_places_on_the_simulated_devices(method, place_simulated):
    summary = place_simulated("--method", method, "--counts", "3", "--link", "k80",
                              "--rnn-budget", "2", "--budget", "0")
    assert summary["method"] == method
    assert summary["device_count"] == 3 and summary["link"] == K80
    assert summary["devices"] == [f"/device:CPU:{k}" for k in range(3)]
    assert summary["predicted_after_s"] > 0


@pytest.mark.parametrize("extra, count, link", [
    (["--counts", "4", "--link", "k80"], 4, K80),
    (["--counts", "1"], 1, None),
    (["--counts", "5"], 5, None),
    (["--link", "25:7600:0.2"], 2, {"latency_us": 25.0, "bytes_per_us": 7600.0,
                                    "copy_share": 0.2, "one_machine": False}),
])
def test_placeto_reports_its_own_greedy_answer_on_any_count_and_link(extra, count, link,
                                                                      place_simulated):
    summary = place_simulated("--method", "placeto", "--start", "random", "--budget", "0",
                              *extra)
    assert (summary["device_count"], len(summary["devices"]), summary["link"]) == (
        count, count, link)
    assert 0 < summary["best_on_walk_step_s"] <= summary["policy_step_s"]


def test_placeto_walks_the_groups_again_when_asked(place_simulated):
    summary = place_simulated("--method", "placeto", "--start", "random", "--budget", "0",
                              "--passes", "3", "--counts", "4", "--link", "k80")
    assert 2 <= summary["passes"] <= 3         # the first pass from a random start moves


def test_the_link_is_what_the_placement_is_simulated_over(place_simulated):
    """A split over a link a million times slower predicts a far longer step: the link given
    is the one simulated, not the measured one."""
    fast, slow = (place_simulated("--method", "round_robin", "--counts", "3", "--link", link)
                  for link in ("k80", "1000000:1"))
    assert slow["predicted_after_s"] > 100 * fast["predicted_after_s"]
    assert slow["predicted_before_s"] == pytest.approx(fast["predicted_before_s"])  # one device


def test_the_text_names_the_simulated_devices_and_the_placement_names_them_too(
        mlp_model, small_profiles, tmp_path, cli_here):
    placement = tmp_path / "placement.json"
    result = cli_here("place", mlp_model, "--devices", "2", "--simulate", "--max-groups", "8",
                      "--cache", small_profiles, "--method", "round_robin", "--counts", "4",
                      "--link", "k80", "--placement-out", str(placement))
    assert result.returncode == 0, result.stderr
    assert "on 4 simulated devices, joined by the link k80" in result.stdout
    assert set(json.loads(placement.read_text()).values()) == {
        f"/device:CPU:{k}" for k in range(4)}


@pytest.mark.parametrize("args, message", [
    (["--counts", "3"], "pass --simulate"),
    (["--link", "k80"], "pass --simulate"),
    (["--simulate", "--counts", "3", "--out", "placed"], "leave out --out"),
    (["--simulate", "--link", "k80", "--out", "placed"], "leave out --out"),
    (["--simulate", "--link", "fast"], "link 'fast'"),
    (["--simulate", "--counts", "0"], "--counts: must be at least 1"),
])
def test_simulated_devices_without_simulating_or_with_a_model_out_are_refused(
        args, message, tmp_path, cli_here):
    result = cli_here("place", "examples:mlp", "--cache", str(tmp_path / "cache"), *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "cache").exists()          # refused before any profile


def test_the_python_api_places_on_simulated_devices_as_the_command_does(mlp_model,
                                                                         small_profiles):
    import tf_placeto as tp

    target, search = tp.Target(devices="2", cache=small_profiles), tp.Search(max_groups=8)
    summary = tp.place(mlp_model, "m_etf", target, search, measure="simulate", n_devices=3,
                       link="k80").summary()
    assert (summary["device_count"], summary["link"]) == (3, K80)
    as_profiled = tp.place(mlp_model, "m_etf", target, search, measure="simulate").summary()
    assert (as_profiled["device_count"], as_profiled["link"]) == (2, None)


@pytest.mark.parametrize("keywords, message", [
    (dict(n_devices=3), "pass --simulate"),
    (dict(measure="simulate", n_devices=0), "at least 1"),
    (dict(measure="simulate", n_devices=True), "at least 1"),
    (dict(measure="simulate", link="k80", out="placed"), "leave out --out"),
])
def test_the_python_api_refuses_simulated_devices_where_they_cannot_serve(keywords, message):
    import tf_placeto as tp

    with pytest.raises(InputError, match=message):
        tp.place("examples:mlp", "m_etf", **keywords)
