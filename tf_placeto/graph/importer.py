"""GraphDef (with its function library) -> OpGraph, reaching into function bodies.

TF2 programs keep the model inside functions called by (Stateful)PartitionedCall ops. Grappler
inlines those calls before the step runs, so the ops that really run, and that a placement can
move, are the body ops. The importer does the same inlining on the protos: each call is
replaced by its body, arguments are wired to the caller's inputs and the call's outputs to the
body's return values. Functions of control flow (While, If, ...) run many times or not at all,
so those ops stay atomic; so do calls that must be compiled by XLA as one cluster, and TF1
calls whose op is the function's name (Defun), which TensorFlow runs whole on the call's device.
TF1 loops (Enter/Merge/NextIteration) are kept op by op; their back edges (NextIteration ->
Merge) are set apart in `loop_back_edges` so that the op graph stays a DAG. Each op's output
dtypes and shapes come from outputs.py.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Optional

from tf_placeto.errors import SourceError
from tf_placeto.graph.op_graph import DataEdge, FunctionInstance, Op, OpGraph
from tf_placeto.graph.outputs import fill_missing_top_level_shapes, output_infos, output_slot
from tf_placeto.graph.sources import load_source

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
# Bounds on inlining, far above real models: the bundled examples and Keras applications nest
# calls 2 deep, and the largest bundled graph (NASNet) has 16,127 ops. An imported op costs
# about 4 KiB and 0.2 ms here, so a million take 4 GiB and minutes; calls nested much deeper
# would reach Python's recursion limit.
MAX_CALL_DEPTH = 64
MAX_OPS = 1_000_000
_ATOMIC_CALL_ATTRS = ("_XlaMustCompile", "_noinline")
_LOOP_BACK_OPS = ("NextIteration", "RefNextIteration")


def called_functions(node) -> list:
    """Names of the functions a NodeDef's attributes refer to (f, body, branches, ...)."""
    return [name for attr in node.attr.values()
            for name in ([attr.func.name] if attr.HasField("func")
                         else [f.name for f in attr.list.func])]


def import_source(source, *example_args) -> OpGraph:
    """The op graph of anything `load_source` takes (a Source names the signature and the tag
    set), with function bodies inlined."""
    loaded = load_source(source, *example_args)
    return import_graph_def(loaded.graph_def, loaded.fetches, source=loaded)


def import_graph_def(graph_def, fetches: Optional[Iterable[str]] = None, source=None) -> OpGraph:
    """Flatten `graph_def` into an OpGraph.

    fetches: top-level tensor or node names the step computes (a signature's outputs). Only
    ops they need are kept, with whole function bodies; None keeps every top-level node.
    """
    flattener = _Flattener(graph_def)
    flattener.expand_top_level()
    graph = flattener.build(fetches, source)
    fill_missing_top_level_shapes(graph, graph_def)
    return graph


class _Flattener:
    """Inlines function calls; tensor references are resolved once every body is expanded."""

    def __init__(self, graph_def):
        self.graph_def = graph_def
        self.functions = {f.signature.name: f for f in graph_def.library.function}
        self.ops: list[Op] = []
        self.op_index: dict[str, int] = {}
        self.aliases: dict[tuple, tuple] = {}     # call output / function arg -> tensor key
        self.control_sets: dict[str, list] = {}   # flat call name -> keys that finish it
        self.data_inputs: list[tuple] = []         # (dst op, dst slot, tensor key)
        self.control_inputs: list[tuple] = []      # (dst op, control key)
        self.instances: list[FunctionInstance] = []

    # ---- expansion -------------------------------------------------------------------------
    def expand_top_level(self):
        self._check_calls()
        nodes = list(self.graph_def.node)
        self._expand(nodes, prefix="", scope=None, inherited_controls=[])

    def _check_calls(self) -> None:
        """Refuse, before anything is inlined, a graph whose inlining would never end (a
        function that calls itself) or would not fit: calls nested deeper than MAX_CALL_DEPTH,
        more than MAX_OPS ops in all; and a node that names a function the library lacks. A
        function is sized once per level it is called at, so calls that double at every level
        are refused as fast as a chain of them."""
        inlined = {}              # (function name, level of the call) -> its ops once inlined

        def size(nodes, calling: list) -> int:
            if len(calling) > MAX_CALL_DEPTH:
                raise SourceError(f"function calls nest more than {MAX_CALL_DEPTH} deep (at "
                                  f"function {calling[-1]!r}); real models nest a few")
            ops = 0
            for node in nodes:
                self._check_function_references(node)
                callee = self._inlinable_callee(node)
                if callee is None:
                    ops += 1
                    continue
                name = callee.signature.name
                if name in calling:
                    loop = " -> ".join(calling[calling.index(name):] + [name])
                    raise SourceError(f"function {name!r} calls itself ({loop}): its calls "
                                      "can never all be inlined")
                key = (name, len(calling))
                if key not in inlined:
                    inlined[key] = size(callee.node_def, calling + [name])
                ops += inlined[key]
            return ops

        if size(self.graph_def.node, []) > MAX_OPS:
            raise SourceError(f"the graph has more than {MAX_OPS:,} ops once its function "
                              "calls are inlined: more than tf-placeto places")

    def _expand(self, nodes, prefix: str, scope: Optional[FunctionInstance], inherited_controls):
        in_function = scope is not None
        by_name = {n.name: n for n in nodes}
        for node in nodes:
            flat = prefix + node.name
            inputs = [self._parse_input(s, prefix, in_function, by_name) for s in node.input]
            controls = [k for k in inputs if k[0] == "c"]
            data = [k for k in inputs if k[0] != "c"]
            if not node.input:
                controls = list(inherited_controls)
            callee = self._inlinable_callee(node)
            if callee is not None:
                self._expand_call(node, flat, callee, scope, data, controls)
                continue
            if flat in self.op_index or flat in self.control_sets:
                raise SourceError(f"two ops would both be named {flat!r} after inlining")
            index = len(self.ops)
            self.op_index[flat] = index
            self.ops.append(Op(index=index, name=flat, type=node.op,
                               requested_device=node.device, node_def=node, scope=scope,
                               outputs=output_infos(node, self.functions)))
            if scope is not None:
                scope.ops.append(index)
            for slot, key in enumerate(data):
                self.data_inputs.append((index, slot, key))
            for key in controls:
                self.control_inputs.append((index, key))

    def _expand_call(self, node, flat, callee, scope, data, controls):
        if flat in self.control_sets or flat in self.op_index:
            raise SourceError(f"two ops would both be named {flat!r} after inlining")
        instance = FunctionInstance(function_name=callee.signature.name, prefix=flat + "/",
                                    parent=scope, call_node=node.name)
        self.instances.append(instance)
        if scope is not None:
            scope.children.append(instance)
        args = callee.signature.input_arg
        if len(args) != len(data):
            raise SourceError(f"call {flat!r} passes {len(data)} inputs to function "
                              f"{callee.signature.name!r}, which takes {len(args)}")
        for arg, key in zip(args, data):
            self.aliases[("a", instance.prefix + arg.name)] = key
        body = {n.name: n for n in callee.node_def}
        finished_by = []
        for k, out_arg in enumerate(callee.signature.output_arg):
            if out_arg.name not in callee.ret:
                raise SourceError(f"function {callee.signature.name!r} does not return "
                                  f"{out_arg.name!r}")
            key = self._parse_input(callee.ret[out_arg.name], instance.prefix, True, body)
            self.aliases[("t", flat, k)] = key
            finished_by.append(key)
        finished_by += [("c", instance.prefix + name) for name in callee.control_ret.values()]
        self.control_sets[flat] = finished_by
        self._expand(list(callee.node_def), instance.prefix, instance, controls)

    def _check_function_references(self, node) -> None:
        for name in called_functions(node):
            if name and name not in self.functions:
                raise SourceError(f"op {node.name!r} uses function {name!r}, which is not in "
                                  "the graph's function library (truncated or corrupt?)")

    def _inlinable_callee(self, node):
        if node.op not in CALL_OPS:
            return None
        if "f" not in node.attr:
            raise SourceError(f"call op {node.name!r} names no function")
        name = node.attr["f"].func.name
        callee = self.functions.get(name)
        if callee is None:
            raise SourceError(f"op {node.name!r} calls function {name!r}, which is not in "
                              "the graph's function library")
        if any(node.attr[a].b for a in _ATOMIC_CALL_ATTRS if a in node.attr) or any(
                callee.attr[a].b for a in _ATOMIC_CALL_ATTRS if a in callee.attr):
            return None
        return callee

    def _parse_input(self, text: str, prefix: str, in_function: bool, by_name) -> tuple:
        if text.startswith("^"):
            return ("c", prefix + text[1:])
        parts = text.split(":")
        if not in_function:
            slot = int(parts[1]) if len(parts) > 1 else 0
            return ("t", prefix + parts[0], slot)
        if len(parts) == 1:
            return ("a", prefix + parts[0])
        if len(parts) != 3 or parts[0] not in by_name:
            raise SourceError(f"function input {text!r} names no node of the function body")
        producer = by_name[parts[0]]
        slot = output_slot(producer, parts[1], int(parts[2]), self.functions)
        return ("t", prefix + parts[0], slot)

    # ---- resolution ------------------------------------------------------------------------
    def _resolve(self, key: tuple) -> tuple:
        """Follow call outputs and function arguments down to (op index, slot)."""
        seen = 0
        while True:
            if key[0] == "t" and key[1] in self.op_index:
                return self.op_index[key[1]], key[2]
            target = self.aliases.get(key)
            if target is None:
                what = key[1] if key[0] != "t" else f"{key[1]}:{key[2]}"
                raise SourceError(f"the graph refers to {what!r}, which does not exist "
                                  "(the file may be truncated or corrupt)")
            key = target
            seen += 1
            if seen > 10_000:
                raise SourceError(f"cyclic function call chain at {key[1]!r}")

    def _resolve_control(self, key: tuple) -> list:
        name = key[1]
        if name in self.op_index:
            return [self.op_index[name]]
        if name not in self.control_sets:
            raise SourceError(f"the graph has a control dependency on {name!r}, which does not "
                              "exist (the file may be truncated or corrupt)")
        result = []
        for sub in self.control_sets[name]:
            if sub[0] == "c":
                result.extend(self._resolve_control(sub))
            elif sub[0] == "a":
                continue  # returning an argument unchanged finishes nothing of the body
            else:
                result.append(self._resolve(sub)[0])
        return result

    def build(self, fetches, source) -> OpGraph:
        data_edges = [DataEdge(*self._resolve(key), dst, slot)
                      for dst, slot, key in self.data_inputs]
        control_edges = sorted({(src, dst) for dst, key in self.control_inputs
                                for src in self._resolve_control(key) if src != dst})
        keep, outputs = None, []
        if fetches is not None:
            targets, outputs = self._fetch_targets(fetches)
            keep = self._needed_ops(targets, data_edges, control_edges)
            outputs = [(self.ops[i].name, slot) for i, slot in outputs]
        graph = _compact(self.ops, data_edges, control_edges, self.instances, keep, source)
        graph.fetch_outputs = [(graph.index(name), slot) for name, slot in outputs]
        is_back = [graph.ops[e.src].type in _LOOP_BACK_OPS for e in graph.data_edges]
        graph.loop_back_edges = [e for e, back in zip(graph.data_edges, is_back) if back]
        graph.data_edges = [e for e, back in zip(graph.data_edges, is_back) if not back]
        return graph

    def _fetch_targets(self, fetches) -> tuple:
        """(ops the fetches run, [(op, slot)] of the fetched tensors): a call's output resolves
        to the op inside its body that makes it, and a fetched call also runs its body's
        control outputs; a name without `:k` fetches no tensor."""
        targets, outputs = [], []
        for name in fetches:
            node, _, slot = name.partition(":")
            if node in self.op_index:
                targets.append(self.op_index[node])
                if slot:
                    outputs.append((self.op_index[node], int(slot)))
            elif node in self.control_sets:
                if slot:
                    outputs.append(self._resolve(("t", node, int(slot))))
                    targets.append(outputs[-1][0])
                targets.extend(self._resolve_control(("c", node)))
            else:
                raise SourceError(f"the signature fetches {name!r}, which is not in the graph")
        return targets, outputs

    def _needed_ops(self, targets, data_edges, control_edges) -> list:
        """The ops `targets` need, with the whole body of every function they run."""
        inputs = [[] for _ in self.ops]
        for e in data_edges:
            inputs[e.dst].append(e.src)
        for src, dst in control_edges:
            inputs[dst].append(src)
        needed = [False] * len(self.ops)
        instance_done = set()
        queue = deque(targets)
        while queue:
            i = queue.popleft()
            if needed[i]:
                continue
            needed[i] = True
            queue.extend(j for j in inputs[i] if not needed[j])
            scope = self.ops[i].scope
            while scope is not None and id(scope) not in instance_done:
                # A called function runs its whole body, not only what the fetch needs.
                instance_done.add(id(scope))
                queue.extend(scope.subtree_ops())
                scope = scope.parent
        return [i for i, flag in enumerate(needed) if flag]


def _compact(ops, data_edges, control_edges, instances, keep, source) -> OpGraph:
    if keep is None:
        return OpGraph(ops, data_edges, control_edges, instances, source)
    new_index = {old: new for new, old in enumerate(keep)}
    kept_ops = []
    for old in keep:
        op = ops[old]
        op.index = new_index[old]
        kept_ops.append(op)
    for inst in instances:
        inst.ops = [new_index[i] for i in inst.ops if i in new_index]
    live = [inst for inst in instances if any(True for _ in inst.subtree_ops())]
    live_ids = {id(inst) for inst in live}
    for inst in live:
        inst.children = [c for c in inst.children if id(c) in live_ids]
    edges = [DataEdge(new_index[e.src], e.src_slot, new_index[e.dst], e.dst_slot)
             for e in data_edges if e.src in new_index and e.dst in new_index]
    controls = [(new_index[s], new_index[d]) for s, d in control_edges
                if s in new_index and d in new_index]
    return OpGraph(kept_ops, edges, controls, live, source)
