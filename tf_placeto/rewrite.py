"""Write a placement back: device strings on NodeDefs, in function bodies too.

The source proto is never touched; every change is made on a copy. A function body called
from several places gets one FunctionDef per distinct placement of its calls: the first keeps
the function's name (so the SavedModel's other users of it, such as restored tf.functions,
run placed too), the others are clones. A SavedModel also records each placed variable's
device in its object graph, where TensorFlow's loader finds it.

A function that names an interface it implements (`api_implements`: Keras' recurrent layers
choose between a CPU and a cuDNN body this way) is not inlined by TensorFlow. It runs as a
multi-device function on its call's task and sees only that task's devices, so a body placed
over two tasks fails. Placed on one device, it stays swappable and its call is pinned there;
placed over several, the attribute is dropped and TensorFlow inlines it like any other call,
each op running where the placement put it (the body the graph names: on a GPU, the
standard implementation instead of cuDNN's).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Optional

from google.protobuf import text_format

from tf_placeto.errors import SourceError
from tf_placeto.files import Staging, check_output_file
from tf_placeto.graph.importer import CALL_OPS, called_functions
from tf_placeto.graph.op_graph import OpGraph
from tf_placeto.graph.sources import (SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE, Source,
                                      is_graph_file)

_FINGERPRINT_FILE = "fingerprint.pb"
_IMPLEMENTS = "api_implements"


def placed_proto(source: Source, graph: OpGraph, placement,
                 clone_suffix: Optional[str] = None, inline_every_call: bool = False) -> object:
    """A copy of source.proto with `placement` ({op name: canonical device}) written in.

    clone_suffix: give every function whose placement changes a clone named with this suffix
    instead of editing it, for a graph imported beside the original in one process (where a
    function name stands for one body).
    inline_every_call: make every `api_implements` function inlinable, even one placed on one
    device, so that each of its ops runs under its call path, the name the graph gives it
    (a swappable call runs its body under names local to the function): what profiling needs
    to time every op.
    """
    proto = type(source.proto)()
    proto.CopyFrom(source.proto)
    if source.kind == "saved_model":
        meta_graph = proto.meta_graphs[source.meta_graph_index]
        graph_def = meta_graph.graph_def
    elif source.kind == "meta_graph_def":
        meta_graph, graph_def = proto, proto.graph_def
    else:
        meta_graph, graph_def = None, proto
    device_of = {graph.index(name): device for name, device in placement.items()}
    top_level = {node.name: node for node in graph_def.node}
    for i, device in device_of.items():
        op = graph.ops[i]
        if op.scope is None:
            top_level[op.local_name].device = device
    if clone_suffix is None:
        protected = _functions_of_other_signatures(meta_graph, source.signature, graph_def)
    else:
        protected = {f.signature.name for f in graph_def.library.function}
    renamed_roots, top_level_calls = _place_functions(graph_def.library, graph, device_of,
                                                      protected, clone_suffix or "_placeto",
                                                      inline_every_call)
    for call_node, function_name in renamed_roots.items():
        _point_call_at(top_level[call_node], function_name)
    for call_node, device in top_level_calls.items():
        top_level[call_node].device = device
    if source.kind == "saved_model":
        _place_saved_variables(meta_graph, graph, device_of)
    return proto


def _functions_of_other_signatures(meta_graph, signature, graph_def) -> set:
    """Functions that another signature runs: placing this one must not move their ops.

    Walks back from the other signatures' outputs through the top-level graph, then into
    every function those nodes call, and every function those call (inputs inside a body name
    the body's own nodes, so only function attributes are followed there).
    """
    if meta_graph is None:
        return set()
    functions = {f.signature.name: f for f in graph_def.library.function}
    nodes = {n.name: n for n in graph_def.node}
    pending = [nodes.get(t.name.split(":")[0])
               for name, sig in meta_graph.signature_def.items() if name != signature
               for t in sig.outputs.values()]
    seen_nodes, used, calls = set(), set(), []
    while pending:
        node = pending.pop()
        if node is None or node.name in seen_nodes:
            continue
        seen_nodes.add(node.name)
        calls.append(node)
        pending += [nodes.get(i.lstrip("^").split(":")[0]) for i in node.input]
    while calls:
        for fname in called_functions(calls.pop()):
            if fname in functions and fname not in used:
                used.add(fname)
                calls += list(functions[fname].node_def)
    return used


def _place_functions(library, graph: OpGraph, device_of: dict, protected: set,
                     clone_suffix: str, inline_every_call: bool) -> tuple:
    """Edit (or clone) FunctionDefs per call instance; returns ({top-level call: new name},
    {top-level call: the device it is pinned to}).

    An instance whose placement changes nothing keeps its function. The first changed
    placement of a function edits it in place, unless another signature runs it (`protected`);
    every other distinct placement gets a clone.
    """
    functions = {f.signature.name: f for f in library.function}
    gradients = {g.function_name: g.gradient_func for g in library.gradient}
    inlined, call_devices = _swappable_calls(graph, device_of, functions, inline_every_call)
    originals: dict = {}
    variants: dict = {}      # function name -> {edit key: final function name}
    final_name: dict = {}    # id(instance) -> function name its call should use
    renamed_roots = {}
    for instance in _post_order([i for i in graph.instances if i.parent is None]):
        edits = {graph.ops[i].local_name: device_of[i] for i in instance.ops if i in device_of}
        edits.update(call_devices.get(id(instance), {}))
        calls = {c.call_node: final_name[id(c)] for c in instance.children
                 if final_name[id(c)] != c.function_name}
        strip = id(instance) in inlined
        key = (frozenset(edits.items()), frozenset(calls.items()), strip)
        name = instance.function_name
        seen = variants.setdefault(name, {})
        if key not in seen and not edits and not calls and not strip:
            seen[key] = name
        elif key not in seen:
            if name not in originals:
                originals[name] = type(functions[name])()
                originals[name].CopyFrom(functions[name])
            if name not in seen.values() and name not in protected:
                target, new_name = functions[name], name
            else:
                new_name = _unused_name(f"{name}{clone_suffix}", functions)
                target = library.function.add()
                target.CopyFrom(originals[name])
                target.signature.name = new_name
                functions[new_name] = target
                if name in gradients:
                    library.gradient.add(function_name=new_name, gradient_func=gradients[name])
            for node in target.node_def:
                if node.name in edits:
                    node.device = edits[node.name]
                if node.name in calls:
                    _point_call_at(node, calls[node.name])
            if strip:
                del target.attr[_IMPLEMENTS]
            seen[key] = new_name
        final_name[id(instance)] = seen[key]
        if instance.parent is None and seen[key] != name:
            renamed_roots[instance.call_node] = seen[key]
    return renamed_roots, call_devices.get(None, {})


def _swappable_calls(graph: OpGraph, device_of: dict, functions: dict,
                     inline_every_call: bool = False) -> tuple:
    """Where each call of an `api_implements` function runs (see the module's docstring).

    Returns (ids of instances to make inlinable, {id(parent instance) or None: {call node:
    device}}) for the calls whose whole body is placed on one device. A body placed in part
    is made inlinable: its other ops may land anywhere; with `inline_every_call`, so is every
    placed body.
    """
    inlined, call_devices = set(), {}
    for instance in graph.instances:
        if _IMPLEMENTS not in functions[instance.function_name].attr:
            continue
        ops = list(instance.subtree_ops())
        devices = {device_of[i] for i in ops if i in device_of}
        if not devices:
            continue                # not placed: runs as written
        if len(devices) == 1 and all(i in device_of for i in ops) and not inline_every_call:
            parent = id(instance.parent) if instance.parent is not None else None
            call_devices.setdefault(parent, {})[instance.call_node] = devices.pop()
        else:
            inlined.add(id(instance))
    return inlined, call_devices


def _post_order(roots):
    for root in roots:
        stack = [(root, False)]
        while stack:
            instance, expanded = stack.pop()
            if expanded:
                yield instance
                continue
            stack.append((instance, True))
            stack.extend((child, False) for child in reversed(instance.children))


def _unused_name(base: str, taken) -> str:
    k = 1
    while f"{base}{k}" in taken:
        k += 1
    return f"{base}{k}"


def _point_call_at(node, function_name: str) -> None:
    if node.op in CALL_OPS:
        node.attr["f"].func.name = function_name
    else:
        node.op = function_name


def _place_saved_variables(meta_graph, graph: OpGraph, device_of: dict) -> None:
    """Record placed variables' devices on their SavedVariable objects.

    A signature's top-level call passes the captured variable handles last, in the order of
    its concrete function's bound_inputs: that pairs each handle op with its object.
    """
    objects = meta_graph.object_graph_def
    for node in meta_graph.graph_def.node:
        if node.op not in CALL_OPS:
            continue
        concrete = objects.concrete_functions.get(node.attr["f"].func.name)
        if concrete is None or not concrete.bound_inputs:
            continue
        data_inputs = [i for i in node.input if not i.startswith("^")]
        captured = data_inputs[len(data_inputs) - len(concrete.bound_inputs):]
        for handle, node_id in zip(captured, concrete.bound_inputs):
            handle_op = handle.split(":")[0]
            if handle_op not in graph:
                continue
            device = device_of.get(graph.index(handle_op))
            saved = objects.nodes[node_id]
            if device is not None and saved.WhichOneof("kind") == "variable":
                saved.variable.device = device


# ---- files ----------------------------------------------------------------------------------
# What a SavedModel folder holds, and so what --overwrite may replace in one; beside the
# names the source itself has at its top level, which the placed copy gets too.
SAVED_MODEL_ENTRIES = {SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE, _FINGERPRINT_FILE, "variables",
                       "assets", "assets.extra", "keras_metadata.pb"}
_VARIABLE_FILE = re.compile(r"^variables\.(index|data-\d+-of-\d+)$")


def check_output_path(source_path, out: str, overwrite: bool) -> None:
    """Refuse, before any work, an OUT that is SOURCE, lies inside it or holds it, whose
    folder does not exist, or that exists: with `overwrite`, unless it is what this write
    would make (a SavedModel folder for a SavedModel source, a graph file for a graph file),
    so that nothing else of the user's can be replaced."""
    out_real = os.path.realpath(out)
    if source_path is not None:
        src_real = os.path.realpath(source_path)
        if out_real == src_real:
            raise SourceError(f"OUT {out} is SOURCE: write the placed copy somewhere else")
        for inner, outer in ((out_real, src_real), (src_real, out_real)):
            if inner.startswith(outer.rstrip(os.sep) + os.sep):
                raise SourceError(f"OUT {out} and SOURCE {source_path} contain one another")
    parent = os.path.dirname(out_real)
    if not os.path.isdir(parent):
        raise SourceError(f"OUT {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SourceError(f"OUT {out}: cannot write in {parent}")
    if not os.path.lexists(out):
        return
    if not overwrite:
        raise SourceError(f"OUT {out} exists; pass --overwrite to replace it")
    in_the_way = _not_replaceable(out, source_path)
    if in_the_way:
        raise SourceError(f"OUT {out} is not {in_the_way}: --overwrite replaces only what "
                          "tf-placeto writes; give another OUT, or move it away yourself")


def _not_replaceable(out: str, source_path) -> Optional[str]:
    """Why `out` may not be replaced by a placed copy of `source_path`, as the end of "OUT
    is not ..." (None: it may)."""
    if os.path.islink(out):
        return "a folder or file but a symbolic link"
    if source_path is None or not os.path.isdir(source_path):
        if os.path.isfile(out) and is_graph_file(out):
            return None
        return "a GraphDef or MetaGraphDef file"
    if not os.path.isdir(out):
        return "a SavedModel folder"
    entries = set(os.listdir(out))
    allowed = SAVED_MODEL_ENTRIES | set(os.listdir(source_path))
    foreign = sorted(entries - allowed)
    if not foreign and os.path.isdir(os.path.join(out, "variables")):
        foreign = [os.path.join("variables", name)
                   for name in sorted(os.listdir(os.path.join(out, "variables")))
                   if not _VARIABLE_FILE.match(name)]
    if foreign:
        return f"a SavedModel folder: it holds {', '.join(foreign[:3])}" + (
            f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
    if entries and not entries & {SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE}:
        return f"a SavedModel folder: it has no {SAVED_MODEL_FILE}"
    return None


def check_placement_path(path: str, source_path, overwrite: bool, out: Optional[str] = None
                         ) -> None:
    """Refuse, before any work, a placement file that cannot be written where asked: inside
    SOURCE or OUT, in a missing folder, or an existing file (with `overwrite`: one that is not
    a placement, a JSON object of op names to devices)."""
    check_output_file(path, "the placement file", keep_out_of=(source_path, out))
    if not os.path.lexists(path):
        return
    if not overwrite:
        raise SourceError(f"the placement file {path} exists; pass --overwrite to replace it")
    if not _is_placement_file(path):
        raise SourceError(f"the placement file {path} exists and is not a placement (a JSON "
                          "object of op names to devices): --overwrite replaces only what "
                          "tf-placeto writes")


def _is_placement_file(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and all(isinstance(k, str) and isinstance(v, str)
                                          for k, v in data.items())


def write_placed(source: Source, proto, out: str, overwrite: bool = False) -> str:
    """Write `proto` to `out` in the source's own kind; nothing is left half-written and the
    old OUT survives any failure whole (tf_placeto.files.Staging)."""
    check_output_path(source.path, out, overwrite)
    if source.kind == "saved_model":
        check_links(source.path)
    with Staging(out) as staging:
        if source.kind == "saved_model":
            written = staging.path("model")
            shutil.copytree(source.path, written, symlinks=True, ignore=shutil.ignore_patterns(
                SAVED_MODEL_FILE, SAVED_MODEL_TEXT_FILE, _FINGERPRINT_FILE))
            name = SAVED_MODEL_TEXT_FILE if source.text_format else SAVED_MODEL_FILE
            _write_proto(proto, os.path.join(written, name), source.text_format)
            if not source.text_format:      # TensorFlow fingerprints binary SavedModels only
                _write_fingerprint(written)
            staging.replace("model")
        else:
            _write_proto(proto, staging.path("graph"), source.text_format)
            staging.replace("graph")
    return out


def check_links(saved_model: str) -> None:
    """Refuse a SavedModel whose copy would not be itself: a symbolic link in it is copied
    as a link, never followed, so one that climbs out of the folder with a relative path
    would point elsewhere from OUT; and only files, folders and links are copied."""
    root = os.path.realpath(saved_model)
    for folder, names, files in os.walk(saved_model):
        for name in names + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                target = os.readlink(path)
                if not os.path.isabs(target) and not os.path.normpath(os.path.join(
                        os.path.realpath(folder), target)).startswith(root + os.sep):
                    raise SourceError(f"{path} links to {target}, outside the SavedModel: its "
                                      "copy would point elsewhere; replace the link by the "
                                      "file, or make it absolute")
            elif not (os.path.isdir(path) or os.path.isfile(path)):
                raise SourceError(f"{path} is neither a file nor a folder: a SavedModel "
                                  "holds only those")


def _write_proto(proto, path: str, as_text: bool) -> None:
    if as_text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text_format.MessageToString(proto))
    else:
        with open(path, "wb") as f:
            f.write(proto.SerializeToString())


def _write_fingerprint(export_dir: str) -> None:
    """A fresh fingerprint.pb: the copied one would describe the unplaced graph."""
    # heavy: TensorFlow, loaded only to write a SavedModel
    from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting

    with open(os.path.join(export_dir, _FINGERPRINT_FILE), "wb") as f:
        f.write(fingerprinting.CreateFingerprintDef(export_dir))
