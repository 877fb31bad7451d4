"""The pictures are drawn on their own canvas: the process's matplotlib backend stays its own."""

import textwrap

from tests.helpers import run_python


def test_drawing_leaves_the_process_backend_and_pyplot_alone(tmp_path):
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["MPLBACKEND"] = "svg"      # a program's own choice, not Agg
        import matplotlib
        import pandas as pd
        from tf_placeto.plots import comparison_plot, gantt

        table = pd.DataFrame([
            {{"graph": "g", "devices": n, "method": method, "status": "ok", "step_s": step,
              "spread_s": 0.0, "predicted_s": step}}
            for n in (2, 4) for method, step in (("m_etf", 0.02), ("lower bound", 0.01))])
        schedule = pd.DataFrame([
            {{"kind": "op", "device": "/device:CPU:0", "start_us": 0.0, "end_us": 5.0}},
            {{"kind": "op", "device": "/device:CPU:1", "start_us": 6.0, "end_us": 9.0}},
            {{"kind": "transfer", "device": "/device:CPU:0->/device:CPU:1", "start_us": 5.0,
              "end_us": 6.0}}])
        drawn = [comparison_plot(table, {str(tmp_path / "compare.png")!r}),
                 gantt(schedule, {str(tmp_path / "gantt.png")!r}, title="t")]
        for path in drawn:
            with open(path, "rb") as f:
                assert f.read(8) == b"\\x89PNG\\r\\n\\x1a\\n", path
        assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
        assert "matplotlib.pyplot" not in sys.modules
    """)
    run_python(code)


def test_every_method_has_a_colour_of_its_own_in_every_plot():
    """Single and optimal, expert and rnn once shared a colour. Each registered method has
    its own, the same whatever else a plot shows; a label no placer has gets another."""
    from tf_placeto import methods
    from tf_placeto.plots import method_colors

    every = method_colors(methods.names())
    assert len(set(every.values())) == len(methods.names())
    assert method_colors(["optimal", "single"]) == {"optimal": every["optimal"],
                                                   "single": every["single"]}
    assert method_colors(["single", "mine"])["mine"] not in every.values()
