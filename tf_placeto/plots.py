"""Pictures people judge placements by: the comparison bars and the simulated schedule.

Each is a matplotlib Figure drawn by its own Agg canvas into a file: no display is needed, and
neither pyplot nor the process's backend is touched, so a program that shows its own plots
(a notebook, a GUI) keeps its backend.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from tf_placeto import methods as placement_methods
from tf_placeto.compare import LOWER_BOUND
from tf_placeto.errors import InputError
from tf_placeto.files import check_output_file, write_atomically

_TRANSFER_COLOR = "#999999"


def _figure(**options):
    """A Figure with an Agg canvas of its own (options: Figure's, such as figsize)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # heavy: only for drawing
    from matplotlib.figure import Figure  # heavy: only for drawing

    figure = Figure(**options)
    FigureCanvasAgg(figure)
    return figure


def check_picture_path(path: str, what: str, keep_out_of=()) -> None:
    """Refuse, before any work, a picture that cannot be written: the path (as
    files.check_output_file) or a format that matplotlib cannot draw, named by its
    extension."""
    check_output_file(path, what, keep_out_of)
    supported = _figure().canvas.get_supported_filetypes()
    if _format(path) not in supported:
        raise InputError(f"{what} {path}: a picture ends in one of "
                         + ", ".join(f".{kind}" for kind in sorted(supported)))


def _format(path: str) -> str:
    return os.path.splitext(path)[1].lstrip(".").lower() or "png"


def _save(figure, path: str) -> str:
    """Draw `figure` into `path` whole (files.write_atomically), in the format its extension
    names (PNG by default)."""
    return write_atomically(path, lambda file: figure.savefig(file, format=_format(path),
                                                              dpi=120), binary=True)


def _colormap(name: str):
    import matplotlib  # heavy: only for drawing

    return matplotlib.colormaps[name]


def method_colors(shown) -> dict:
    """{method: its colour} for the methods `shown`: by its place among all registered methods
    (tf_placeto.methods), then any other label, so that a method keeps its colour from plot
    to plot; each its own while there are at most 20: tab20's strong colours first, then its
    light ones, so that a light colour's strong kin is far from it in the plot's order."""
    registered = placement_methods.names()
    order = registered + [method for method in dict.fromkeys(shown) if method not in registered]
    tab20 = _colormap("tab20").colors
    palette = tab20[0::2] + tab20[1::2]
    return {method: palette[order.index(method) % len(palette)] for method in shown}


def comparison_plot(table: pd.DataFrame, path: str) -> str:
    """Per graph, bars of each method's step time per device count, the lower bound as a line.

    Infeasible placements are hatched: their time is real (or simulated) but they do not fit.
    In a real comparison, a placement that was only predicted is an outline at its prediction.
    """
    graphs = list(dict.fromkeys(table["graph"]))
    methods = [m for m in dict.fromkeys(table["method"]) if m != LOWER_BOUND]
    slots = len(methods) * table.groupby("graph")["devices"].nunique().max()
    figure = _figure(figsize=(min(16, max(6, 0.45 * slots + 2)), 3.2 * len(graphs) + 0.6))
    axes = figure.subplots(len(graphs), 1, squeeze=False)
    colors = method_colors(methods)
    width = 0.8 / max(len(methods), 1)
    for axis, graph in zip(axes[:, 0], graphs):
        rows = table[table["graph"] == graph]
        counts = sorted(rows["devices"].unique())
        for k, method in enumerate(methods):
            chosen = rows[rows["method"] == method].set_index("devices").reindex(counts)
            x = np.arange(len(counts)) + (k - (len(methods) - 1) / 2) * width
            infeasible = (chosen["status"] != "ok").to_numpy()
            error = chosen["spread_s"].fillna(0).to_numpy() * 1e3 / 2
            axis.bar(x, chosen["step_s"] * 1e3, width, color=colors[method], label=method,
                     yerr=error if error.any() else None,
                     hatch=None, edgecolor="black", linewidth=0.3)
            predicted_only = chosen["step_s"].isna() & chosen["predicted_s"].notna()
            axis.bar(x[predicted_only.to_numpy()], chosen["predicted_s"][predicted_only] * 1e3,
                     width, fill=False, edgecolor=colors[method], linestyle="--")
            for xi, yi, bad in zip(x, chosen["step_s"] * 1e3, infeasible):
                if bad and np.isfinite(yi):
                    axis.bar(xi, yi, width, fill=False, hatch="///", edgecolor="red", linewidth=0)
        bound = rows[rows["method"] == LOWER_BOUND].set_index("devices").reindex(counts)
        for i, value in enumerate(bound["step_s"] * 1e3):
            axis.hlines(value, i - 0.45, i + 0.45, colors="black", linestyles="--",
                        label=LOWER_BOUND if i == 0 else None)
        axis.set_xticks(np.arange(len(counts)))
        axis.set_xticklabels([f"{c} devices" for c in counts])
        axis.set_ylabel("step time (ms)")
        axis.set_title(graph + ("   (outlined: predicted, not measured)"
                                if rows["step_s"].isna().any() else ""), fontsize=10)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="upper center", ncol=min(len(labels), 6), fontsize=8,
                  bbox_to_anchor=(0.5, 1.0))
    figure.tight_layout(rect=(0, 0, 1, 0.88))
    return _save(figure, path)


def gantt(schedule: pd.DataFrame, path: str, title: str = "") -> str:
    """One row per device with its ops as bars, then one row per link with its transfers."""
    ops = schedule[schedule["kind"] == "op"]
    transfers = schedule[schedule["kind"] == "transfer"]
    rows = list(dict.fromkeys(sorted(ops["device"].unique()))) + \
        sorted(transfers["device"].unique())
    figure = _figure(figsize=(12, 0.6 * len(rows) + 1.5))
    axis = figure.subplots()
    colors = _colormap("tab20")
    for level, row in enumerate(rows):
        chosen = schedule[schedule["device"] == row]
        spans = list(zip(chosen["start_us"] / 1e3, (chosen["end_us"] - chosen["start_us"]) / 1e3))
        is_link = "->" in row
        facecolors = _TRANSFER_COLOR if is_link else [colors(i % 20) for i in range(len(spans))]
        axis.broken_barh(spans, (level - 0.4, 0.8), facecolors=facecolors, linewidth=0)
    axis.set_yticks(range(len(rows)))
    axis.set_yticklabels([_short(row) for row in rows], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("time in the step (ms)")
    axis.set_title(title or "simulated schedule")
    figure.tight_layout()
    return _save(figure, path)


def _short(device: str) -> str:
    """'/job:worker/replica:0/task:1/device:CPU:0' -> 'task:1/CPU:0'; links likewise."""
    return "->".join(part.replace("/job:worker/replica:0/", "").replace("device:", "")
                     for part in device.split("->"))


def tensorboard_graph(graph, op_devices, logdir: str) -> str:
    """Write the op graph, function bodies flattened, with each op on its device, as a
    TensorBoard log: its Graphs view colours the ops by device ("Color: Device").

    op_devices: the device name of each op, in graph.ops order.
    """
    import tensorflow as tf  # heavy: only for writing the log

    graph_def = tf.compat.v1.GraphDef()
    nodes = [graph_def.node.add(name=op.name, op=op.type, device=device)
             for op, device in zip(graph.ops, op_devices)]
    for edge in sorted(graph.data_edges, key=lambda e: (e.dst, e.dst_slot)):
        src = graph.ops[edge.src].name
        nodes[edge.dst].input.append(src if edge.src_slot == 0 else f"{src}:{edge.src_slot}")
    for src, dst in graph.control_edges:
        nodes[dst].input.append(f"^{graph.ops[src].name}")
    writer = tf.summary.create_file_writer(logdir)
    with writer.as_default():
        tf.summary.graph(graph_def)
    writer.close()
    return logdir


def learning_curve(log: dict, path: str) -> str:
    """A policy's training (the `training.json` of tf_placeto.policy.training): imitation's
    loss and accuracy per epoch, then reinforcement learning's mean return per iteration
    (with its rolling mean over 20; the iterations measured for real also as points) and the
    best placements' speedup over one device."""
    imitation = pd.DataFrame(log.get("imitation", []))
    iterations = pd.DataFrame(log.get("iterations", []))
    figure = _figure(figsize=(10, 3.4))
    left, right = figure.subplots(1, 2, squeeze=True)
    if len(imitation):
        left.plot(imitation["epoch"], imitation["loss"], label="loss")
        left.plot(imitation["epoch"], imitation["accuracy"], label="accuracy")
        left.legend(fontsize=8)
    left.set_xlabel("imitation epoch")
    left.set_title("imitation" if len(imitation) else "imitation (none)", fontsize=10)
    if len(iterations):
        right.plot(iterations["iteration"], iterations["mean_return"], alpha=0.3,
                   label="mean return")
        right.plot(iterations["iteration"],
                   iterations["mean_return"].rolling(20, min_periods=1).mean(),
                   label="mean return, rolling 20")
        right.plot(iterations["iteration"], iterations["best_speedup"],
                   label="best placements' speedup over one device")
        if "real_return" in iterations:
            right.scatter(iterations["iteration"], iterations["real_return"], s=8,
                          label="mean return measured for real")
        right.legend(fontsize=8)
    right.set_xlabel("iteration")
    right.set_title("reinforcement learning" if len(iterations)
                    else "reinforcement learning (none)", fontsize=10)
    figure.tight_layout()
    return _save(figure, path)
