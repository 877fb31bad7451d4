"""tf-placeto compare: the scoreboard, simulated or measured for the best predicted."""

import json



def test_compare_simulated_writes_table_plot_and_csv(tmp_path, cli_here):
    plot, table = tmp_path / "compare.png", tmp_path / "compare.csv"
    result = cli_here("compare", "examples:mlp", "--simulate", "--counts", "2", "4",
                     "--methods", "single,round_robin,m_etf", "--cache", str(tmp_path / "cache"),
                     "--max-groups", "8", "--json", "--plot", str(plot), "--csv", str(table))
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["devices"], r["method"]) for r in rows] == [
        (n, m) for n in (2, 4) for m in ("lower bound", "single", "round_robin", "m_etf")]
    assert all(r["step_s"] >= r["lower_bound_s"] for r in rows)
    assert plot.read_bytes()[:4] == b"\x89PNG" and "vs_best" in table.read_text()


def test_compare_measures_only_the_best_predicted_and_the_single_device(tmp_path, cli_here):
    result = cli_here("compare", "examples:mlp", "--cluster", "local:2", "--measure-best", "1",
                     "--methods", "single,round_robin,m_etf", "--repeats", "2",
                     "--cache", str(tmp_path / "cache"), "--max-groups", "8", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["method"]: r for r in json.loads(result.stdout)}
    measured = {m for m, r in rows.items() if r["runs"]}
    best_other = min((r["predicted_s"], m) for m, r in rows.items()
                     if m not in ("lower bound",) and r["status"] == "ok")[1]
    assert measured == {"single", best_other}
    for method in set(rows) - measured - {"lower bound"}:
        assert rows[method]["step_s"] is None and "not measured" in rows[method]["reason"]
